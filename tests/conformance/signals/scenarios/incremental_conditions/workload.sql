-- Both signals in one transaction: both are handled before the first watermark row is seen,
-- so the queue is orders, customers, items.
BEGIN;
INSERT INTO public.debezium_signal VALUES ('sig-cond-1', 'execute-snapshot', '{"data-collections": ["public.orders", "public.customers"], "type": "incremental", "additional-conditions": [{"data-collection": "public.orders", "filter": "status = ''open'' AND id > 30"}]}');
INSERT INTO public.debezium_signal VALUES ('sig-cond-2', 'execute-snapshot', '{"data-collections": ["public.items"], "type": "incremental", "surrogate-key": "sku"}');
COMMIT;
SELECT pg_sleep(10);
INSERT INTO public.orders VALUES (1000, 'open', 1.00);
