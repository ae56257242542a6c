-- Incremental snapshot of two tables requested by a signal row (chunk size 1024, Debezium's default).
CREATE TABLE public.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
CREATE TABLE public.a (id integer PRIMARY KEY, v text);
INSERT INTO public.a SELECT g, 'a' || g FROM generate_series(1, 3000) g;
CREATE TABLE public.b (k1 integer, k2 varchar(10), txt text, amount numeric(10,2), at timestamp(3),
                       PRIMARY KEY (k1, k2));
INSERT INTO public.b SELECT g / 3, 'k' || (g % 3), 'text ' || g, g * 1.25, timestamp '2024-01-01 00:00:00' + g * interval '1 minute 0.5 second'
  FROM generate_series(1, 300) g;
