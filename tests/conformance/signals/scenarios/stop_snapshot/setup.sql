-- stop-snapshot for one queued table, then a stop without data-collections (all); chunk size 100.
CREATE TABLE public.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
CREATE TABLE public.a (id integer PRIMARY KEY, v text);
INSERT INTO public.a SELECT g, 'a' || g FROM generate_series(1, 150) g;
CREATE TABLE public.b (id integer PRIMARY KEY, v text);
INSERT INTO public.b SELECT g, 'b' || g FROM generate_series(1, 30) g;
CREATE TABLE public.c (id integer PRIMARY KEY, v text);
INSERT INTO public.c SELECT g, 'c' || g FROM generate_series(1, 20) g;
