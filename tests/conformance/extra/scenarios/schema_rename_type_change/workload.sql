INSERT INTO public.r VALUES (2, 2, 'second', 2.50, 'n2', '2024-01-02 10:00:00.456');
ALTER TABLE public.r RENAME COLUMN note TO remark;
INSERT INTO public.r VALUES (3, 3, 'third', 3.75, 'n3', '2024-01-03 10:00:00');
SELECT pg_sleep(1);
-- int -> bigint
ALTER TABLE public.r ALTER COLUMN small TYPE bigint;
INSERT INTO public.r VALUES (4, 9000000000, 'fourth', 4.00, 'n4', NULL);
SELECT pg_sleep(1);
-- varchar(10) -> varchar(50), numeric(5,2) -> numeric(8,3), timestamp(3) -> timestamp(6)
ALTER TABLE public.r ALTER COLUMN name TYPE varchar(50);
ALTER TABLE public.r ALTER COLUMN amount TYPE numeric(8,3);
ALTER TABLE public.r ALTER COLUMN ts TYPE timestamp(6);
INSERT INTO public.r VALUES (5, 5, 'a name longer than ten characters', 12345.678, 'n5', '2024-01-05 10:00:00.123456');
UPDATE public.r SET amount = 1.001 WHERE id = 1;
SELECT pg_sleep(1);
-- text -> varchar(20), integer key renamed
ALTER TABLE public.r ALTER COLUMN remark TYPE varchar(20);
ALTER TABLE public.r RENAME COLUMN id TO rid;
INSERT INTO public.r VALUES (6, 6, 'sixth', 6, 'n6', NULL);
UPDATE public.r SET remark = 'changed' WHERE rid = 2;
DELETE FROM public.r WHERE rid = 3;
SELECT pg_sleep(1);
-- bigint -> numeric (no precision), varchar -> text
ALTER TABLE public.r ALTER COLUMN small TYPE numeric;
ALTER TABLE public.r ALTER COLUMN name TYPE text;
INSERT INTO public.r VALUES (7, 7.5, 'seventh', 7, 'n7', NULL);
