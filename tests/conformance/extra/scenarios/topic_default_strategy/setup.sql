-- DefaultTopicNamingStrategy: the same table name in two schemas, and an invalid character
CREATE SCHEMA app;
CREATE TABLE public.t (id integer PRIMARY KEY, v text);
CREATE TABLE app.t (id integer PRIMARY KEY, v text);
CREATE TABLE public."my-table" (id integer PRIMARY KEY, v text);
INSERT INTO public.t VALUES (1, 'public');
INSERT INTO app.t VALUES (1, 'app');
INSERT INTO public."my-table" VALUES (1, 'x');
