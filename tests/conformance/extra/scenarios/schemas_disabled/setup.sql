-- JSON converters without schemas: key/value are bare payloads
CREATE TABLE public.items (id integer PRIMARY KEY, name text NOT NULL, price numeric(8,2), seen timestamptz);
INSERT INTO public.items VALUES (1, 'apple', 1.50, '2024-01-02 03:04:05+00');
INSERT INTO public.items VALUES (2, 'pear', NULL, NULL);
