INSERT INTO public.t VALUES (2, 'two');
-- an idle period of about 2 s: only heartbeats
SELECT pg_sleep(2);
UPDATE public.t SET v = 'uno' WHERE id = 1;
BEGIN;
INSERT INTO public.t VALUES (3, 'three');
DELETE FROM public.t WHERE id = 2;
COMMIT;
SELECT pg_sleep(1);
