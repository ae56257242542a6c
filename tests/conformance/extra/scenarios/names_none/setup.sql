-- column, table and prefix names that are not valid Avro names
CREATE TABLE public."my-table" ("1st col" integer PRIMARY KEY, "ümlaut" text, "a-b" text, "_under" text,
                                "Mixed Case" integer, plain text);
CREATE TABLE public."Ünïcode tábla" (id integer PRIMARY KEY, "väl" text);
INSERT INTO public."my-table" VALUES (1, 'ü', 'ab', 'u', 7, 'p');
INSERT INTO public."Ünïcode tábla" VALUES (1, 'x');
