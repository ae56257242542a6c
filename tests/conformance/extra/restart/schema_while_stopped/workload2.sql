INSERT INTO public.s VALUES (6, 'six', 6.25, 'c6');
INSERT INTO public.t2 VALUES (2, 'after the restart');
