-- the table's definition changes while the connector is stopped (see ../README.md)
CREATE TABLE public.s (id integer PRIMARY KEY, a text, b integer, n numeric(5,2));
INSERT INTO public.s VALUES (1, 'one', 10, 1.5);
