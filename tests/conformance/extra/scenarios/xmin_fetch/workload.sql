INSERT INTO public.t VALUES (2, 'b');
UPDATE public.t SET v = 'c' WHERE id = 1;
SELECT pg_logical_emit_message(false, 'note', 'hello');
BEGIN;
DELETE FROM public.t WHERE id = 2;
SELECT pg_logical_emit_message(true, 'txmsg', 'inside');
COMMIT;
