-- FULL identity: only a column that is not captured changes -> skipped
UPDATE public.full_t SET hits = hits + 1 WHERE id = 1;
-- a captured column changes -> emitted
UPDATE public.full_t SET name = 'a2', hits = hits + 1 WHERE id = 1;
-- nothing changes at all -> skipped
UPDATE public.full_t SET name = name WHERE id = 1;
-- NULL to NULL -> skipped
UPDATE public.full_t SET name = NULL, hits = 7 WHERE id = 3;
-- the TOASTed value is not touched (unchanged TOAST in the new tuple, whole in the old one)
UPDATE public.full_t SET hits = 5 WHERE id = 2;
UPDATE public.full_t SET name = 'b2' WHERE id = 2;
-- the TOASTed value changes
UPDATE public.full_t SET big = repeat('z', 5000) WHERE id = 2;
-- key change
UPDATE public.full_t SET id = 20 WHERE id = 2;
-- DEFAULT identity: no old tuple, so nothing to compare -> emitted
UPDATE public.def_t SET hits = hits + 1 WHERE id = 1;
UPDATE public.def_t SET name = name WHERE id = 1;
UPDATE public.def_t SET hits = 3 WHERE id = 2;
-- DEFAULT identity key change: the old tuple has only the key
UPDATE public.def_t SET id = 10, hits = 9 WHERE id = 1;
-- inserts and deletes are never compared
INSERT INTO public.full_t VALUES (4, 'd', 0, 'small');
DELETE FROM public.full_t WHERE id = 4;
DELETE FROM public.def_t WHERE id = 10;
