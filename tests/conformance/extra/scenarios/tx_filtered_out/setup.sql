-- provide.transaction.metadata with filters: transactions whose changes are all left out
-- (tables outside table.include.list but in the publication, skipped.operations, a message prefix
-- outside the filter) still get BEGIN and END
CREATE TABLE public.keep_a (id integer PRIMARY KEY, v text);
CREATE TABLE public.skip_me (id integer PRIMARY KEY, v text);
INSERT INTO public.keep_a VALUES (1, 'one'), (2, 'two');
INSERT INTO public.skip_me VALUES (1, 'one');
