-- replica.identity.autoset.values: tables whose replica identity Debezium changes when streaming starts
CREATE TABLE public.full_me (id integer PRIMARY KEY, name text, qty integer);
CREATE TABLE public.by_index (id integer PRIMARY KEY, code text NOT NULL, note text);
CREATE UNIQUE INDEX by_index_code ON public.by_index (code);
CREATE TABLE public.already_full (id integer PRIMARY KEY, name text);
ALTER TABLE public.already_full REPLICA IDENTITY FULL;
CREATE TABLE public.was_full (id integer PRIMARY KEY, name text);
ALTER TABLE public.was_full REPLICA IDENTITY FULL;
CREATE TABLE public.nothing_me (id integer PRIMARY KEY, name text);
CREATE TABLE public.multi_a (id integer PRIMARY KEY, name text);
CREATE TABLE public.multi_b (id integer PRIMARY KEY, name text);
-- matched by two entries: Debezium leaves it as it is
CREATE TABLE public.overlap (id integer PRIMARY KEY, name text);
-- not captured (table.exclude.list): left as it is although an entry matches it
CREATE TABLE public.excluded (id integer PRIMARY KEY, name text);
-- matched by no entry
CREATE TABLE public.untouched (id integer PRIMARY KEY, name text);
INSERT INTO public.full_me VALUES (1, 'one', 10), (2, 'two', 20);
INSERT INTO public.by_index VALUES (1, 'c1', 'n1'), (2, 'c2', 'n2');
INSERT INTO public.already_full VALUES (1, 'one'), (2, 'two');
INSERT INTO public.was_full VALUES (1, 'one'), (2, 'two');
INSERT INTO public.nothing_me VALUES (1, 'one');
INSERT INTO public.multi_a VALUES (1, 'one');
INSERT INTO public.multi_b VALUES (1, 'one');
INSERT INTO public.overlap VALUES (1, 'one'), (2, 'two');
INSERT INTO public.excluded VALUES (1, 'one');
INSERT INTO public.untouched VALUES (1, 'one'), (2, 'two');
