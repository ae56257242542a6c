-- only an excluded table
BEGIN;
INSERT INTO public.skip_me VALUES (2, 'two');
INSERT INTO public.skip_me VALUES (3, 'three');
COMMIT;
-- mixed: the first change is to the excluded table
BEGIN;
INSERT INTO public.skip_me VALUES (4, 'four');
INSERT INTO public.keep_a VALUES (3, 'three');
UPDATE public.skip_me SET v = 'FOUR' WHERE id = 4;
UPDATE public.keep_a SET v = 'THREE' WHERE id = 3;
COMMIT;
-- single statements on the excluded table
UPDATE public.skip_me SET v = 'ONE' WHERE id = 1;
DELETE FROM public.skip_me WHERE id = 1;
-- only skipped operations (deletes)
BEGIN;
DELETE FROM public.keep_a WHERE id = 1;
COMMIT;
-- a skipped delete and a kept insert
BEGIN;
DELETE FROM public.keep_a WHERE id = 2;
INSERT INTO public.keep_a VALUES (4, 'four');
COMMIT;
-- only a logical message whose prefix is filtered out
BEGIN;
SELECT pg_logical_emit_message(true, 'hidden.x', 'filtered');
COMMIT;
-- a filtered message, a kept message and an excluded table
BEGIN;
SELECT pg_logical_emit_message(true, 'hidden.y', 'filtered');
SELECT pg_logical_emit_message(true, 'shown', 'kept');
INSERT INTO public.skip_me VALUES (5, 'five');
COMMIT;
-- non-transactional messages
SELECT pg_logical_emit_message(false, 'hidden.z', 'filtered');
SELECT pg_logical_emit_message(false, 'shown', 'kept');
-- an empty transaction (pgoutput sends nothing for it)
BEGIN;
SELECT 1;
COMMIT;
-- truncates: the excluded table, and the captured one (truncate is not in skipped.operations
-- here, so it is emitted)
TRUNCATE public.skip_me;
TRUNCATE public.keep_a;
