INSERT INTO public.s VALUES (2, 'two', 20, 2.5);
