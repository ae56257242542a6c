-- changes to every table; excluded tables must produce nothing
INSERT INTO public.a VALUES (2, 'pa2');
INSERT INTO public.b VALUES (2, 'pb2');
INSERT INTO app.a VALUES (2, 'aa2');
INSERT INTO app.b VALUES (2, 'ab2');
INSERT INTO app.c VALUES (2, 'ac2');
BEGIN;
UPDATE public.a SET v = 'pa1x' WHERE id = 1;
UPDATE public.b SET v = 'pb1x' WHERE id = 1;
UPDATE app.a SET v = 'aa1x' WHERE id = 1;
UPDATE app.b SET v = 'ab1x' WHERE id = 1;
UPDATE app.c SET v = 'ac1x' WHERE id = 1;
COMMIT;
DELETE FROM public.b WHERE id = 2;
DELETE FROM app.c WHERE id = 2;
DELETE FROM app.b WHERE id = 2;
DELETE FROM public.a WHERE id = 2;
