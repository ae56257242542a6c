-- snapshot.include.collection.list: only public.b is snapshotted; public.a and public.c are
-- still captured while streaming.
CREATE TABLE public.a (id integer PRIMARY KEY, v text);
CREATE TABLE public.b (id integer PRIMARY KEY, v text);
CREATE TABLE public.c (id integer PRIMARY KEY, v text);
INSERT INTO public.a VALUES (1, 'a1'), (2, 'a2');
INSERT INTO public.b VALUES (1, 'b1'), (2, 'b2');
INSERT INTO public.c VALUES (1, 'c1');
