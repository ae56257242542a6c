-- snapshot markers when the first and last captured tables (alphabetically) are empty
CREATE TABLE public.alpha (id integer PRIMARY KEY, v text);
CREATE TABLE public.mid (id integer PRIMARY KEY, v text);
CREATE TABLE public.zulu (id integer PRIMARY KEY, v text);
INSERT INTO public.mid VALUES (1, 'only row');
