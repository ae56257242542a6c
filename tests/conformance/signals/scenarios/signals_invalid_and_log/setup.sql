-- log signal and invalid signals: the stream goes on.
CREATE TABLE public.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
CREATE TABLE public.a (id integer PRIMARY KEY, v text);
INSERT INTO public.a VALUES (1, 'a1');
