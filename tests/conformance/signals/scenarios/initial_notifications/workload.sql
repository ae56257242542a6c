INSERT INTO public.a VALUES (3, 'a3 streamed');
