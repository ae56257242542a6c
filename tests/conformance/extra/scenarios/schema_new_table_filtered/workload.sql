CREATE TABLE public.keep2 (id integer PRIMARY KEY, v text);
INSERT INTO public.keep2 VALUES (1, 'new table matching the include list');
INSERT INTO public.keep1 VALUES (2, 'old table');
CREATE TABLE public.other2 (id integer PRIMARY KEY);
INSERT INTO public.other2 VALUES (1);
INSERT INTO public.other VALUES (2);
UPDATE public.keep2 SET v = 'changed';
INSERT INTO public.keep1 VALUES (3, 'last');
