INSERT INTO public.a VALUES (6, 'a6 before the signal');
INSERT INTO public.debezium_signal VALUES ('sig-block-1', 'execute-snapshot', '{"data-collections": ["public.a", "public.b"], "type": "blocking", "additional-conditions": [{"data-collection": "public.b", "filter": "SELECT * FROM public.b WHERE id > 6 ORDER BY id DESC"}]}');
-- the blocking snapshot reads the tables now: no writes until it is over
SELECT pg_sleep(8);
INSERT INTO public.a VALUES (7, 'a7 after the snapshot');
UPDATE public.b SET v = 'b1 updated' WHERE id = 1;
