-- custom topic.delimiter, a hyphenated topic.prefix and a custom transaction topic
CREATE TABLE public.t (id integer PRIMARY KEY, v text);
CREATE TABLE public."my-table" (id integer PRIMARY KEY, v text);
INSERT INTO public.t VALUES (1, 'a');
