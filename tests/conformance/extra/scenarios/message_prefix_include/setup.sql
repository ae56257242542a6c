-- message.prefix.include.list: anchored, case-insensitive regular expressions over the prefix
CREATE TABLE public.t (id integer PRIMARY KEY, v text);
INSERT INTO public.t VALUES (1, 'one');
