-- skip.messages.without.change with column filters: an UPDATE whose captured columns did not
-- change is left out (compared: the before and after values of the captured columns)
CREATE TABLE public.full_t (id integer PRIMARY KEY, name text, hits integer, big text);
ALTER TABLE public.full_t REPLICA IDENTITY FULL;
ALTER TABLE public.full_t ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE public.def_t (id integer PRIMARY KEY, name text, hits integer, big text);
ALTER TABLE public.def_t ALTER COLUMN big SET STORAGE EXTERNAL;
INSERT INTO public.full_t VALUES (1, 'a', 0, 'small'), (2, 'b', 0, repeat('x', 5000)), (3, NULL, 0, NULL);
INSERT INTO public.def_t VALUES (1, 'a', 0, 'small'), (2, 'b', 0, repeat('y', 5000));
