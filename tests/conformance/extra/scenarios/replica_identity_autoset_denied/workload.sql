-- wait (up to 60 s) until the connector has set the identity of a_owned, then a moment more
DO $$
BEGIN
  FOR i IN 1..600 LOOP
    EXIT WHEN (SELECT relreplident FROM pg_class WHERE oid = 'public.a_owned'::regclass) = 'f';
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT pg_sleep(1);
-- altered: FULL
UPDATE public.a_owned SET name = 'one!' WHERE id = 1;
DELETE FROM public.a_owned WHERE id = 2;
-- not altered (not the owner): DEFAULT
UPDATE public.b_denied SET name = 'one!' WHERE id = 1;
DELETE FROM public.b_denied WHERE id = 2;
-- owned, but after the failure: DEFAULT
UPDATE public.c_owned SET name = 'one!' WHERE id = 1;
DELETE FROM public.c_owned WHERE id = 2;
