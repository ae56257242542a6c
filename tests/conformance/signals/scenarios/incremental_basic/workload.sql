-- data-collections are regular expressions: "public.a" (dot = any char) and "public\.b".
INSERT INTO public.debezium_signal VALUES ('sig-basic-1', 'execute-snapshot', '{"data-collections": ["public.a", "public\\.b"], "type": "incremental"}');
SELECT pg_sleep(8);
INSERT INTO public.a VALUES (3001, 'after the snapshot');
