-- SET/DROP NOT NULL and SET/DROP DEFAULT while streaming: each sends a new Relation message
CREATE TABLE public.n (id integer PRIMARY KEY, a integer, b text DEFAULT 'bee', c integer NOT NULL, d date);
INSERT INTO public.n VALUES (1, 1, 'one', 1, '2020-01-01');
