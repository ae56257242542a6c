-- column.mask.hash (v1: Java-serialized value) and column.mask.hash.v2 (value bytes), SHA-256 with a salt
CREATE TABLE public.customers (id integer PRIMARY KEY, name varchar(40), email text, city varchar(10), code char(8),
                               plain text);
INSERT INTO public.customers VALUES (1, 'Alice', 'alice@example.com', 'Berlin', 'A1', 'kept');
INSERT INTO public.customers VALUES (2, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.customers VALUES (3, '', '', '', '', '');
INSERT INTO public.customers VALUES (4, 'Zoë Ünïcode', 'zoe@example.com', 'Köln', 'Z', 'x');
