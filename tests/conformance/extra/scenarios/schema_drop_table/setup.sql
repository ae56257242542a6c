-- dropped tables, and tables dropped and re-created with the same name
CREATE TABLE public.d1 (id integer PRIMARY KEY, v text);
CREATE TABLE public.d2 (id integer PRIMARY KEY, v text);
CREATE TABLE public.d3 (id integer PRIMARY KEY, v text);
INSERT INTO public.d1 VALUES (1, 'one');
INSERT INTO public.d2 VALUES (1, 'one');
INSERT INTO public.d3 VALUES (1, 'one');
