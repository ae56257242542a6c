INSERT INTO public."my-table" VALUES (2, 'a2');
UPDATE public."Ünïcode tábla" SET v = 'b2' WHERE id = 1;
DELETE FROM public."dot.table" WHERE id = 1;
INSERT INTO "Sales Dept"."order$lines" VALUES (2, 'd2');
SELECT pg_logical_emit_message(false, 'note', 'hello');
