INSERT INTO public.amounts VALUES (4, 4.00, 'four');
INSERT INTO public.amounts VALUES (5, 'NaN', 'five');
INSERT INTO public.amounts VALUES (6, 6.75, 'six');
UPDATE public.amounts SET amount = 'NaN', note = 'four updated' WHERE id = 4;
UPDATE public.amounts SET note = 'six updated' WHERE id = 6;
