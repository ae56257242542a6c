INSERT INTO public.t VALUES (3, 'three');
UPDATE public.t SET v = 'uno' WHERE id = 1;
DELETE FROM public.t WHERE id = 2;
-- primary-key change: update -> delete + tombstone + create in Debezium
UPDATE public.t SET id = 30 WHERE id = 3;
DELETE FROM public.t WHERE id = 1;
