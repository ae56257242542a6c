INSERT INTO public.ta VALUES (2, 'c2', 'x2', 'second');
INSERT INTO public.tab2 VALUES (2, 'c2', 'second');
INSERT INTO public.orders VALUES (2, 2, 'two');
INSERT INTO app.orders VALUES (2, 2, 'two');
INSERT INTO public."Mixed" VALUES (2, 'v2');
INSERT INTO public.nomatch VALUES (2, 'two');
-- updates not touching the key columns
UPDATE public.ta SET name = 'first!' WHERE id = 1;
UPDATE public.tab2 SET name = 'first!' WHERE id = 1;
UPDATE public.orders SET c = 'one!' WHERE a = 1;
UPDATE public."Mixed" SET id = 10 WHERE id = 1;
-- updates changing a key column
UPDATE public.ta SET xcode = 'x1b' WHERE id = 1;
UPDATE public.tab2 SET code = 'c1b' WHERE id = 1;
UPDATE public.orders SET b = 5 WHERE a = 1;
UPDATE app.orders SET a = 7 WHERE a = 1;
UPDATE public."Mixed" SET "V" = 'v1b' WHERE id = 10;
UPDATE public.nomatch SET id = 3 WHERE id = 2;
-- deletes
DELETE FROM public.ta WHERE id = 2;
DELETE FROM public.tab2 WHERE id = 2;
DELETE FROM public.orders WHERE a = 2;
DELETE FROM public."Mixed" WHERE id = 2;
