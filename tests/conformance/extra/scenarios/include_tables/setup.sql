-- two schemas with several tables; only some of them are captured (see props.txt)
CREATE SCHEMA app;
CREATE TABLE public.a (id integer PRIMARY KEY, v text);
CREATE TABLE public.b (id integer PRIMARY KEY, v text);
CREATE TABLE app.a (id integer PRIMARY KEY, v text);
CREATE TABLE app.b (id integer PRIMARY KEY, v text);
CREATE TABLE app.c (id integer PRIMARY KEY, v text);
INSERT INTO public.a VALUES (1, 'pa1');
INSERT INTO public.b VALUES (1, 'pb1');
INSERT INTO app.a VALUES (1, 'aa1');
INSERT INTO app.b VALUES (1, 'ab1');
INSERT INTO app.c VALUES (1, 'ac1');
