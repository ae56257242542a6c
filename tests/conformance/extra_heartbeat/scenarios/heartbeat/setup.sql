-- heartbeat.interval.ms=500: heartbeats while idle, between and after a few changes
CREATE TABLE public.t (id integer PRIMARY KEY, v text);
INSERT INTO public.t VALUES (1, 'one');
