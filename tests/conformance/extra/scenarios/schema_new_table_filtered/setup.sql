-- publication.autocreate.mode=filtered: the publication lists the tables matching the filters at
-- start-up; tables created later that also match are not in it
CREATE TABLE public.keep1 (id integer PRIMARY KEY, v text);
CREATE TABLE public.other (id integer PRIMARY KEY);
INSERT INTO public.keep1 VALUES (1, 'k');
INSERT INTO public.other VALUES (1);
