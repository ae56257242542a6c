-- replica.identity.autoset.values with a connector user that owns some of the tables: the
-- ALTER TABLE on b_denied fails (must be owner). Debezium logs the error and goes on streaming, but
-- its JDBC transaction is left aborted, so the identity of c_owned (processed after b_denied) is not
-- read and not changed either; a_owned (processed before) is changed.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'hw_ri_limited') THEN
    CREATE ROLE hw_ri_limited LOGIN REPLICATION;
  END IF;
END $$;
CREATE TABLE public.a_owned (id integer PRIMARY KEY, name text);
CREATE TABLE public.b_denied (id integer PRIMARY KEY, name text);
CREATE TABLE public.c_owned (id integer PRIMARY KEY, name text);
ALTER TABLE public.a_owned OWNER TO hw_ri_limited;
ALTER TABLE public.c_owned OWNER TO hw_ri_limited;
GRANT SELECT ON public.b_denied TO hw_ri_limited;
-- a FOR ALL TABLES publication needs a superuser: made here, the connector finds it
CREATE PUBLICATION dbz_publication FOR ALL TABLES;
INSERT INTO public.a_owned VALUES (1, 'one'), (2, 'two');
INSERT INTO public.b_denied VALUES (1, 'one'), (2, 'two');
INSERT INTO public.c_owned VALUES (1, 'one'), (2, 'two');
