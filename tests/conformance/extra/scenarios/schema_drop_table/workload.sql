INSERT INTO public.d1 VALUES (2, 'two');
INSERT INTO public.d2 VALUES (2, 'two');
SELECT pg_sleep(1);
DROP TABLE public.d1;
INSERT INTO public.d2 VALUES (3, 'three');
SELECT pg_sleep(1);
-- re-created with other columns and another key
CREATE TABLE public.d1 (code text PRIMARY KEY, qty bigint NOT NULL DEFAULT 0, id integer);
INSERT INTO public.d1 VALUES ('A', 5, 1);
UPDATE public.d1 SET qty = 6 WHERE code = 'A';
-- dropped and re-created in one transaction, with rows before and after: the table's Relation
-- message was sent before, so the first row keeps the old schema
BEGIN;
INSERT INTO public.d2 VALUES (4, 'four');
DROP TABLE public.d2;
CREATE TABLE public.d2 (id integer PRIMARY KEY, v text, extra boolean DEFAULT true);
INSERT INTO public.d2 (id, v) VALUES (1, 'again');
COMMIT;
SELECT pg_sleep(1);
-- the first streamed row of d3 is in the transaction that drops it: its Relation message is
-- handled after the commit, when the catalog no longer has the table (no key, every column optional)
BEGIN;
INSERT INTO public.d3 VALUES (2, 'two');
DROP TABLE public.d3;
COMMIT;
SELECT pg_sleep(1);
-- re-created with the same definition
CREATE TABLE public.d3 (id integer PRIMARY KEY, v text);
INSERT INTO public.d3 VALUES (1, 'same definition');
DELETE FROM public.d3;
-- the same, but re-created (other definition) in the same transaction: the old row's Relation
-- message is described with the new table's catalog entries, looked up by name
CREATE TABLE public.d4 (id integer PRIMARY KEY, v text NOT NULL DEFAULT 'x');
BEGIN;
INSERT INTO public.d4 VALUES (1, 'old');
DROP TABLE public.d4;
CREATE TABLE public.d4 (v text PRIMARY KEY, id bigint);
INSERT INTO public.d4 VALUES ('new', 2);
COMMIT;
