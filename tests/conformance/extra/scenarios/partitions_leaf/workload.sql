INSERT INTO public.meas VALUES (3, '2023-07-01', 'c'), (4, '2024-07-01', 'd');
UPDATE public.meas SET v = 'a!' WHERE id = 1;
-- the partition key changes: the row moves to another partition
UPDATE public.meas SET logdate = '2024-01-15' WHERE id = 3;
DELETE FROM public.meas WHERE id = 2;
INSERT INTO public.cities VALUES (3, 'us', 'Denver');
UPDATE public.cities SET region = 'us' WHERE id = 1;
UPDATE public.cities SET name = 'Austin' WHERE id = 2;
INSERT INTO public.orders VALUES (4, 'eu', '2023-12-31', 4.00), (5, 'us', '2023-01-01', 5.00);
UPDATE public.orders SET odate = '2024-12-31' WHERE id = 4;
UPDATE public.orders SET region = 'us' WHERE id = 2;
DELETE FROM public.orders WHERE id = 1;
-- a partition created while streaming
CREATE TABLE public.meas_2025 PARTITION OF public.meas FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
INSERT INTO public.meas VALUES (5, '2025-02-02', 'e');
-- writing to a leaf directly
INSERT INTO public.meas_2023 VALUES (6, '2023-08-08', 'f');
