-- run while the connector is stopped: rows written under three successive definitions
INSERT INTO public.s VALUES (3, 'three', 30, 3.5);
ALTER TABLE public.s ADD COLUMN c text NOT NULL DEFAULT 'cc';
INSERT INTO public.s VALUES (4, 'four', 40, 4.5, 'c4');
ALTER TABLE public.s DROP COLUMN b;
ALTER TABLE public.s ALTER COLUMN n TYPE numeric(9,3);
ALTER TABLE public.s ALTER COLUMN a SET NOT NULL;
INSERT INTO public.s VALUES (5, 'five', 5.125, 'c5');
UPDATE public.s SET a = 'one!' WHERE id = 1;
CREATE TABLE public.t2 (id integer PRIMARY KEY, v text);
INSERT INTO public.t2 VALUES (1, 'created while stopped');
