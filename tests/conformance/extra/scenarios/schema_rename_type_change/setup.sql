-- renamed columns and changed column types while streaming
CREATE TABLE public.r (id integer PRIMARY KEY, small integer, name varchar(10), amount numeric(5,2), note text,
                       ts timestamp(3));
INSERT INTO public.r VALUES (1, 1, 'first', 1.25, 'n1', '2024-01-01 10:00:00.123');
