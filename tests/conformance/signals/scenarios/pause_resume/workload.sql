BEGIN;
INSERT INTO public.debezium_signal VALUES ('sig-pause-1', 'execute-snapshot', '{"data-collections": ["public.a"], "type": "incremental"}');
INSERT INTO public.debezium_signal VALUES ('sig-pause-2', 'pause-snapshot', NULL);
COMMIT;
SELECT pg_sleep(5);
-- streamed while paused
INSERT INTO public.a VALUES (251, 'while paused');
UPDATE public.a SET v = 'a5 updated while paused' WHERE id = 5;
UPDATE public.a SET v = 'a150 updated while paused' WHERE id = 150;
SELECT pg_sleep(2);
INSERT INTO public.debezium_signal VALUES ('sig-pause-3', 'resume-snapshot', '{}');
SELECT pg_sleep(8);
