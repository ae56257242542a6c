-- tables created while streaming are captured from their first row (publication FOR ALL TABLES)
CREATE TABLE public.old (id integer PRIMARY KEY, v text);
INSERT INTO public.old VALUES (1, 'x');
CREATE SCHEMA app;
