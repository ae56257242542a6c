INSERT INTO public.orders VALUES (5, 'cancelled', 50.00);
UPDATE public.orders SET status = 'shipped' WHERE id = 1;
INSERT INTO public.items VALUES (3, 'c');
