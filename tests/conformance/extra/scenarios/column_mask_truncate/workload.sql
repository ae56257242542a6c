INSERT INTO public.people VALUES (4, 'Bartholomew', 'bart@example.com', 'short', 'CD', 3, 'q', 'streamed bio', 'p');
INSERT INTO public.people (id) VALUES (5);
-- a TOASTed note, then an update not touching it (unchanged TOAST placeholder, truncated)
INSERT INTO public.people VALUES (6, 'Toast', 't@example.com', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 300) i), 'T', 1, 't', 'b', 'p');
UPDATE public.people SET name = 'Toasty' WHERE id = 6;
UPDATE public.people SET name = 'Alexandra', email = 'alexandra@example.com' WHERE id = 1;
DELETE FROM public.people WHERE id = 2;
