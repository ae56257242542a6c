-- skipped.operations=c,u: creates and updates dropped; snapshot reads and deletes remain
CREATE TABLE public.t (id integer PRIMARY KEY, v text);
INSERT INTO public.t VALUES (1, 'one'), (2, 'two');
