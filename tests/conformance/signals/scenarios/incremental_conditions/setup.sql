-- additional-conditions on one table, surrogate-key (a unique non-key column) on another; chunk size 100.
CREATE TABLE public.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
CREATE TABLE public.orders (id integer PRIMARY KEY, status text NOT NULL, amount numeric(8,2));
INSERT INTO public.orders SELECT g, CASE WHEN g % 3 = 0 THEN 'open' ELSE 'closed' END, g * 2.5 FROM generate_series(1, 450) g;
CREATE TABLE public.customers (id integer PRIMARY KEY, name text);
INSERT INTO public.customers SELECT g, 'customer ' || g FROM generate_series(1, 150) g;
CREATE TABLE public.items (id integer PRIMARY KEY, sku varchar(20) NOT NULL UNIQUE, qty integer);
-- sku order differs from id order
INSERT INTO public.items SELECT g, 'sku-' || lpad(((g * 37) % 251)::text, 4, '0'), g FROM generate_series(1, 250) g;
