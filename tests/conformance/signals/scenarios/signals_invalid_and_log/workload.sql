INSERT INTO public.debezium_signal VALUES ('sig-log-1', 'log', '{"message": "hello from the signal table"}');
INSERT INTO public.debezium_signal VALUES ('sig-bad-1', 'no-such-signal', '{}');
INSERT INTO public.debezium_signal VALUES ('sig-bad-2', 'execute-snapshot', '{"data-collections": ["public.a"');
INSERT INTO public.debezium_signal VALUES ('sig-bad-3', 'execute-snapshot', '{"data-collections": ["public.does_not_exist"], "type": "incremental"}');
SELECT pg_sleep(3);
INSERT INTO public.debezium_signal VALUES ('sig-bad-4', 'execute-snapshot', '{"data-collections": [], "type": "incremental"}');
INSERT INTO public.debezium_signal VALUES ('sig-bad-5', 'execute-snapshot', NULL);
SELECT pg_sleep(3);
INSERT INTO public.a VALUES (2, 'after the signals');
