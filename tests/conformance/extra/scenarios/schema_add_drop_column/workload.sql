INSERT INTO public.t VALUES (2, 'two', 20);
-- nullable, no default
ALTER TABLE public.t ADD COLUMN c integer;
INSERT INTO public.t VALUES (3, 'three', 30, 300);
-- NOT NULL with a default (existing rows get it)
ALTER TABLE public.t ADD COLUMN d text NOT NULL DEFAULT 'dflt';
INSERT INTO public.t (id, a, b, c) VALUES (4, 'four', 40, 400);
UPDATE public.t SET a = 'one!' WHERE id = 1;
-- nullable with a default
ALTER TABLE public.t ADD COLUMN n numeric(6,2) DEFAULT 1.5;
INSERT INTO public.t (id) VALUES (5);
-- NOT NULL without a default (empty table)
INSERT INTO public.e VALUES (1);
DELETE FROM public.e;
ALTER TABLE public.e ADD COLUMN v varchar(5) NOT NULL;
INSERT INTO public.e VALUES (2, 'vv');
SELECT pg_sleep(1);
-- drop a column in the middle
ALTER TABLE public.t DROP COLUMN b;
INSERT INTO public.t (id, a, c) VALUES (6, 'six', 600);
UPDATE public.t SET c = 601 WHERE id = 6;
DELETE FROM public.t WHERE id = 2;
SELECT pg_sleep(1);
-- drop the last column, then add one with the dropped name back
ALTER TABLE public.t DROP COLUMN n;
ALTER TABLE public.t ADD COLUMN b bigint DEFAULT 7;
INSERT INTO public.t (id, a) VALUES (7, 'seven');
UPDATE public.t SET b = 70 WHERE id = 7;
