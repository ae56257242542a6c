CREATE TABLE public.fresh (id serial PRIMARY KEY, v text NOT NULL DEFAULT 'v', n numeric(4,1));
INSERT INTO public.fresh (v, n) VALUES ('a', 1.5);
INSERT INTO public.fresh DEFAULT VALUES;
UPDATE public.fresh SET n = 2.5 WHERE id = 1;
DELETE FROM public.fresh WHERE id = 2;
-- created and filled in one transaction, in another schema
BEGIN;
CREATE TABLE app.intx (code varchar(8) PRIMARY KEY, qty integer DEFAULT 1);
INSERT INTO app.intx VALUES ('A-1', 3);
INSERT INTO app.intx (code) VALUES ('B-2');
COMMIT;
-- a keyless table with REPLICA IDENTITY FULL, and CREATE TABLE AS
CREATE TABLE public.nokey (a integer, b text);
ALTER TABLE public.nokey REPLICA IDENTITY FULL;
INSERT INTO public.nokey VALUES (1, 'one');
UPDATE public.nokey SET b = 'uno';
DELETE FROM public.nokey;
CREATE TABLE public.ctas AS SELECT g AS id, 'row ' || g AS label FROM generate_series(1, 2) g;
INSERT INTO public.old VALUES (2, 'y');
