-- Blocking snapshot of two tables, one with an additional condition that is a full SELECT.
CREATE TABLE public.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
CREATE TABLE public.a (id integer PRIMARY KEY, v text);
INSERT INTO public.a SELECT g, 'a' || g FROM generate_series(1, 5) g;
CREATE TABLE public.b (id integer PRIMARY KEY, v text);
INSERT INTO public.b SELECT g, 'b' || g FROM generate_series(1, 10) g;
