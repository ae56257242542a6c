-- Execute and stop in one transaction: both signals are handled before the first window closes,
-- so the stop is applied when the second chunk of public.a is about to be read (b removed).
BEGIN;
INSERT INTO public.debezium_signal VALUES ('sig-stop-1', 'execute-snapshot', '{"data-collections": ["public.a", "public.b", "public.c"], "type": "incremental"}');
INSERT INTO public.debezium_signal VALUES ('sig-stop-2', 'stop-snapshot', '{"data-collections": ["public.b"], "type": "incremental"}');
COMMIT;
SELECT pg_sleep(6);
-- A stop without data-collections stops the whole snapshot (after the first chunk of public.a).
BEGIN;
INSERT INTO public.debezium_signal VALUES ('sig-stop-3', 'execute-snapshot', '{"data-collections": ["public.a", "public.c"], "type": "incremental"}');
INSERT INTO public.debezium_signal VALUES ('sig-stop-4', 'stop-snapshot', '{"type": "incremental"}');
COMMIT;
SELECT pg_sleep(6);
INSERT INTO public.c VALUES (21, 'after the stops');
