-- primary key definition and replica identity changed while streaming
CREATE TABLE public.p (id integer PRIMARY KEY, code text NOT NULL, v text);
INSERT INTO public.p VALUES (1, 'c1', 'one');
