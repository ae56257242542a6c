INSERT INTO public.alpha VALUES (1, 'streamed');
INSERT INTO public.zulu VALUES (1, 'streamed');
