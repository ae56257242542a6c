-- schema changes in the middle of transactions: Debezium reads the catalog after the commit
CREATE TABLE public.x (id integer PRIMARY KEY, a text);
CREATE TABLE public.y (id integer PRIMARY KEY, a text);
INSERT INTO public.x VALUES (1, 'one');
