-- a large transaction with a rolled-back savepoint (nested), a released one,
-- updates and deletes; a large transaction rolled back; one whose only changes are in a
-- rolled-back savepoint; small transactions around them
INSERT INTO public.small VALUES (1, 'before');
BEGIN;
INSERT INTO public.big SELECT g, 'a' || g FROM generate_series(1, 400) g;
SAVEPOINT s1;
INSERT INTO public.big SELECT g, 's1 ' || g FROM generate_series(1001, 1200) g;
SAVEPOINT s2;
INSERT INTO public.big SELECT g, 's2 ' || g FROM generate_series(1201, 1300) g;
RELEASE SAVEPOINT s2;
ROLLBACK TO SAVEPOINT s1;
SAVEPOINT s3;
INSERT INTO public.big SELECT g, 's3 ' || g FROM generate_series(2001, 2005) g;
RELEASE SAVEPOINT s3;
UPDATE public.big SET v = 'u' || id WHERE id <= 5;
DELETE FROM public.big WHERE id BETWEEN 6 AND 8;
INSERT INTO public.small VALUES (2, 'inside');
COMMIT;
INSERT INTO public.small VALUES (3, 'between');
BEGIN;
INSERT INTO public.big SELECT g, 'gone' || g FROM generate_series(5001, 5400) g;
ROLLBACK;
BEGIN;
SAVEPOINT only_one;
INSERT INTO public.big SELECT g, 'gone' || g FROM generate_series(6001, 6400) g;
ROLLBACK TO SAVEPOINT only_one;
COMMIT;
INSERT INTO public.small VALUES (4, 'after');
