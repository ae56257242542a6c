-- message.key.columns on a keyless table (FULL identity) and on a PK table (key overridden)
CREATE TABLE public.nokey (code text NOT NULL, name text, qty integer);
ALTER TABLE public.nokey REPLICA IDENTITY FULL;
CREATE TABLE public.withpk (id integer PRIMARY KEY, code text NOT NULL, name text);
INSERT INTO public.nokey VALUES ('k1', 'first', 1);
INSERT INTO public.withpk VALUES (1, 'c1', 'first');
