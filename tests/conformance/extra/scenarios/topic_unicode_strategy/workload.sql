BEGIN;
INSERT INTO public.order_items VALUES (2, 'a2');
UPDATE public."Ünïcode tábla" SET v = 'b2' WHERE id = 1;
DELETE FROM public."my-table" WHERE id = 1;
COMMIT;
SELECT pg_logical_emit_message(false, 'note', 'hello');
