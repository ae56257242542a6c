-- columns added and dropped while streaming; `e` stays empty until it gets a NOT NULL column
CREATE TABLE public.t (id integer PRIMARY KEY, a text, b integer);
CREATE TABLE public.e (id integer PRIMARY KEY);
INSERT INTO public.t VALUES (1, 'one', 10);
