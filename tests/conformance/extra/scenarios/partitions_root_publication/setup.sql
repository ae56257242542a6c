-- partitioned tables (as partitions_leaf) with a user-created publication publishing via the root
CREATE TABLE public.meas (id integer NOT NULL, logdate date NOT NULL, v text,
                          PRIMARY KEY (id, logdate)) PARTITION BY RANGE (logdate);
CREATE TABLE public.meas_2023 PARTITION OF public.meas FOR VALUES FROM ('2023-01-01') TO ('2024-01-01');
CREATE TABLE public.meas_2024 PARTITION OF public.meas FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE public.cities (id integer NOT NULL, region text NOT NULL, name text,
                            PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE public.cities_eu PARTITION OF public.cities FOR VALUES IN ('eu');
CREATE TABLE public.cities_us PARTITION OF public.cities FOR VALUES IN ('us');
CREATE TABLE public.orders (id integer NOT NULL, region text NOT NULL, odate date NOT NULL, amount numeric(7,2),
                            PRIMARY KEY (id, region, odate)) PARTITION BY LIST (region);
CREATE TABLE public.orders_eu PARTITION OF public.orders FOR VALUES IN ('eu') PARTITION BY RANGE (odate);
CREATE TABLE public.orders_eu_2023 PARTITION OF public.orders_eu FOR VALUES FROM ('2023-01-01') TO ('2024-01-01');
CREATE TABLE public.orders_eu_2024 PARTITION OF public.orders_eu FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE public.orders_us PARTITION OF public.orders FOR VALUES IN ('us');
INSERT INTO public.meas VALUES (1, '2023-06-01', 'a'), (2, '2024-06-01', 'b');
INSERT INTO public.cities VALUES (1, 'eu', 'Paris'), (2, 'us', 'Boston');
INSERT INTO public.orders VALUES (1, 'eu', '2023-03-03', 1.00), (2, 'eu', '2024-04-04', 2.00),
                                 (3, 'us', '2024-05-05', 3.00);
-- a publication created by the user, for the partitioned roots only (not `unpublished`), via the root
CREATE TABLE public.unpublished (id integer PRIMARY KEY);
CREATE PUBLICATION dbz_publication FOR TABLE public.meas, public.cities, public.orders
    WITH (publish_via_partition_root = true);
