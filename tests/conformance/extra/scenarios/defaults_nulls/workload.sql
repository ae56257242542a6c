-- all defaults omitted
INSERT INTO public.d (id) VALUES (2);
-- explicit NULLs for the nullable columns
INSERT INTO public.d (id, i, t, vc, b, n, dt) VALUES (3, NULL, NULL, NULL, NULL, NULL, NULL);
-- explicit values
INSERT INTO public.d VALUES (4, -1, 0, 'x', 'y', 'z', false, true, -999.99, 999.99, '1970-01-01', '2038-01-19');
UPDATE public.d SET i = NULL, t = 'changed', n = 1.05 WHERE id = 2;
UPDATE public.d SET i = 5, dt = NULL WHERE id = 3;
DELETE FROM public.d WHERE id = 1;
DELETE FROM public.d WHERE id = 3;
DELETE FROM public.d WHERE id = 4;
