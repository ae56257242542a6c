INSERT INTO public.a VALUES (3, 'a3');
INSERT INTO public.b VALUES (3, 'b3');
UPDATE public.c SET v = 'c1 updated' WHERE id = 1;
