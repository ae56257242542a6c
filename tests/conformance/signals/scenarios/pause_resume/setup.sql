-- pause-snapshot in the transaction of execute-snapshot (one chunk is emitted, then it pauses), resume later; chunk size 100.
CREATE TABLE public.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
CREATE TABLE public.a (id integer PRIMARY KEY, v text);
INSERT INTO public.a SELECT g, 'a' || g FROM generate_series(1, 250) g;
