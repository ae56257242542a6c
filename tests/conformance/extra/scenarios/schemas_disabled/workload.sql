INSERT INTO public.items VALUES (3, 'plum', 2.25, '2024-05-06 07:08:09.123456+00');
UPDATE public.items SET price = 0.99 WHERE id = 1;
UPDATE public.items SET id = 20 WHERE id = 2;
DELETE FROM public.items WHERE id = 3;
