-- xmin.fetch.interval.ms > 0: streamed events carry the slot's xmin, snapshot events do not
CREATE TABLE public.t (id integer PRIMARY KEY, v text);
INSERT INTO public.t VALUES (1, 'a');
