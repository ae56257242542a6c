-- message.key.columns entries are anchored, case-insensitive regular expressions: each
-- <table regex>:<col> becomes the regex "<table regex>.<col>" over schema.table.column; a table's key
-- is every column any entry matches (entries in order, columns in table order), else its primary key
CREATE SCHEMA app;
-- public.t.*:code matches ta.code and (the dot matches any character) ta.xcode
CREATE TABLE public.ta (id integer PRIMARY KEY, code text NOT NULL, xcode text, name text);
-- two entries match: public.t.*:code and public.tab2:id
CREATE TABLE public.tab2 (id integer PRIMARY KEY, code text NOT NULL, name text);
-- (.*).orders:a,b in two schemas; the entry orders:c matches nothing (anchored)
CREATE TABLE public.orders (a integer NOT NULL, b integer NOT NULL, c text);
ALTER TABLE public.orders REPLICA IDENTITY FULL;
CREATE TABLE app.orders (a integer NOT NULL, b integer NOT NULL, c text);
ALTER TABLE app.orders REPLICA IDENTITY FULL;
-- PUBLIC.mixed:v matches public."Mixed"."V" (case-insensitive)
CREATE TABLE public."Mixed" (id integer PRIMARY KEY, "V" text NOT NULL);
ALTER TABLE public."Mixed" REPLICA IDENTITY FULL;
-- public.nomatch:zzz names no column: the primary key stays
CREATE TABLE public.nomatch (id integer PRIMARY KEY, v text);
INSERT INTO public.ta VALUES (1, 'c1', 'x1', 'first');
INSERT INTO public.tab2 VALUES (1, 'c1', 'first');
INSERT INTO public.orders VALUES (1, 1, 'one');
INSERT INTO app.orders VALUES (1, 1, 'one');
INSERT INTO public."Mixed" VALUES (1, 'v1');
INSERT INTO public.nomatch VALUES (1, 'one');
