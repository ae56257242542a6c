-- Notifications of the initial snapshot only (sink channel).
CREATE TABLE public.a (id integer PRIMARY KEY, v text);
INSERT INTO public.a VALUES (1, 'a1'), (2, 'a2');
CREATE TABLE public.b (id integer PRIMARY KEY, v text);
INSERT INTO public.b VALUES (1, 'b1');
CREATE TABLE public.empty_c (id integer PRIMARY KEY);
