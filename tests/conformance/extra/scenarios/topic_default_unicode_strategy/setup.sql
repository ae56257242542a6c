-- DefaultUnicodeTopicNamingStrategy
CREATE SCHEMA app;
CREATE TABLE app.snake_case (id integer PRIMARY KEY, v text);
CREATE TABLE public."tábla" (id integer PRIMARY KEY, v text);
INSERT INTO app.snake_case VALUES (1, 'a');
INSERT INTO public."tábla" VALUES (1, 'b');
