INSERT INTO public.p VALUES (2, 'c2', 'two');
SELECT pg_sleep(1);
-- no key at all (inserts only: updates need a replica identity)
ALTER TABLE public.p DROP CONSTRAINT p_pkey;
INSERT INTO public.p VALUES (3, 'c3', 'three');
SELECT pg_sleep(1);
-- composite key
ALTER TABLE public.p ADD PRIMARY KEY (id, code);
INSERT INTO public.p VALUES (4, 'c4', 'four');
UPDATE public.p SET v = 'four!' WHERE id = 4;
UPDATE public.p SET code = 'c4b' WHERE id = 4;
DELETE FROM public.p WHERE id = 1;
SELECT pg_sleep(1);
-- REPLICA IDENTITY FULL
ALTER TABLE public.p REPLICA IDENTITY FULL;
UPDATE public.p SET v = 'two!' WHERE id = 2;
DELETE FROM public.p WHERE id = 2;
SELECT pg_sleep(1);
-- key moved to another column
ALTER TABLE public.p DROP CONSTRAINT p_pkey, ADD PRIMARY KEY (code);
INSERT INTO public.p VALUES (5, 'c5', 'five');
UPDATE public.p SET id = 50 WHERE code = 'c5';
SELECT pg_sleep(1);
-- no primary key, a unique index instead (and REPLICA IDENTITY USING INDEX)
ALTER TABLE public.p DROP CONSTRAINT p_pkey;
CREATE UNIQUE INDEX p_id_idx ON public.p (id);
ALTER TABLE public.p ALTER COLUMN id SET NOT NULL;
ALTER TABLE public.p REPLICA IDENTITY USING INDEX p_id_idx;
INSERT INTO public.p VALUES (6, 'c6', 'six');
UPDATE public.p SET v = 'six!' WHERE id = 6;
DELETE FROM public.p WHERE id = 6;
SELECT pg_sleep(1);
ALTER TABLE public.p REPLICA IDENTITY DEFAULT;
ALTER TABLE public.p ADD PRIMARY KEY (id);
UPDATE public.p SET v = 'fifty' WHERE id = 50;
DELETE FROM public.p WHERE id = 50;
