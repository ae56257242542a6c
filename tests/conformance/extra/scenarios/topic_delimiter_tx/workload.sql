BEGIN;
INSERT INTO public.t VALUES (2, 'b');
INSERT INTO public."my-table" VALUES (1, 'c');
SELECT pg_logical_emit_message(true, 'txmsg', 'inside');
COMMIT;
SELECT pg_logical_emit_message(false, 'note', 'outside');
