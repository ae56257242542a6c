INSERT INTO public."my-table" VALUES (2, 'ö', 'cd', 'v', 8, 'q');
UPDATE public."my-table" SET "ümlaut" = 'ä' WHERE "1st col" = 1;
UPDATE public."my-table" SET "1st col" = 3 WHERE "1st col" = 2;
DELETE FROM public."Ünïcode tábla" WHERE id = 1;
