INSERT INTO public.debezium_signal VALUES ('sig-id-1', 'execute-snapshot', '{"data-collections": ["public.a", "public.b"], "type": "incremental"}');
SELECT pg_sleep(8);
INSERT INTO public.b VALUES (21, 'after the snapshot');
