INSERT INTO public.t VALUES (2, 'public2');
INSERT INTO app.t VALUES (2, 'app2');
UPDATE public."my-table" SET v = 'y' WHERE id = 1;
SELECT pg_logical_emit_message(false, 'note', 'hello');
