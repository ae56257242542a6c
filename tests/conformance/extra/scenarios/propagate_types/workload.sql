INSERT INTO public.items (id, title, body, price, ratio, qty, flag, created, code, tags, note, big)
    VALUES (2, 'second', NULL, 1.00, NULL, 4, false, '2024-05-06 07:08:09', 'CD', NULL, NULL, 10);
UPDATE public.items SET qty = 5 WHERE id = 1;
