-- The identities are changed when streaming starts, which may be just after the connector reports
-- it is streaming: wait (up to 60 s) until every change is visible, so the workload sees them all.
DO $$
BEGIN
  FOR i IN 1..600 LOOP
    EXIT WHEN (SELECT string_agg(relname || '=' || relreplident::text, ',' ORDER BY relname)
               FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'
                 AND relname IN ('full_me', 'by_index', 'was_full', 'nothing_me', 'multi_a', 'multi_b'))
              = 'by_index=i,full_me=f,multi_a=f,multi_b=f,nothing_me=n,was_full=d';
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
-- DEFAULT -> FULL: updates and deletes carry the whole old row
UPDATE public.full_me SET qty = 11 WHERE id = 1;
DELETE FROM public.full_me WHERE id = 2;
-- DEFAULT -> USING INDEX by_index_code: the old row holds the index column (code)
UPDATE public.by_index SET note = 'n1!' WHERE id = 1;
UPDATE public.by_index SET code = 'c1b' WHERE id = 1;
DELETE FROM public.by_index WHERE id = 2;
-- already FULL
UPDATE public.already_full SET name = 'one!' WHERE id = 1;
DELETE FROM public.already_full WHERE id = 2;
-- FULL -> DEFAULT: no old row for updates, only the key for deletes
UPDATE public.was_full SET name = 'one!' WHERE id = 1;
DELETE FROM public.was_full WHERE id = 2;
-- NOTHING: updates and deletes would be refused by the server (publication publishes them)
INSERT INTO public.nothing_me VALUES (2, 'two');
-- two tables from one regex entry
UPDATE public.multi_a SET name = 'a!' WHERE id = 1;
DELETE FROM public.multi_b WHERE id = 1;
-- two entries match: unchanged (DEFAULT)
UPDATE public.overlap SET name = 'one!' WHERE id = 1;
DELETE FROM public.overlap WHERE id = 2;
-- excluded and unmatched tables
UPDATE public.excluded SET name = 'one!' WHERE id = 1;
UPDATE public.untouched SET name = 'one!' WHERE id = 1;
DELETE FROM public.untouched WHERE id = 2;
