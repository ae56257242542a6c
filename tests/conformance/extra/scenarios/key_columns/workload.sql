INSERT INTO public.nokey VALUES ('k2', 'second', 2);
INSERT INTO public.withpk VALUES (2, 'c2', 'second');
-- update not touching the key columns
UPDATE public.nokey SET qty = 10 WHERE code = 'k1';
UPDATE public.withpk SET name = 'first!' WHERE id = 1;
-- update changing a key column
UPDATE public.nokey SET code = 'k1b' WHERE code = 'k1';
UPDATE public.withpk SET code = 'c1b' WHERE id = 1;
-- deletes
DELETE FROM public.nokey WHERE code = 'k2';
DELETE FROM public.withpk WHERE id = 2;
