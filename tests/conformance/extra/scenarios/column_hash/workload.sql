INSERT INTO public.customers VALUES (5, 'Bob', 'bob@example.com', 'Paris', 'B2', 'p');
UPDATE public.customers SET name = 'Alicia', email = 'alicia@example.com' WHERE id = 1;
INSERT INTO public.customers VALUES (6, left(repeat('long name ', 30), 40), repeat('e', 100), 'Rome', 'C3', 'q');
DELETE FROM public.customers WHERE id = 2;
