-- table and schema names with characters that are invalid in Kafka topic names (default strategy)
CREATE TABLE public."my-table" (id integer PRIMARY KEY, v text);
CREATE TABLE public."Ünïcode tábla" (id integer PRIMARY KEY, v text);
CREATE TABLE public."dot.table" (id integer PRIMARY KEY, v text);
CREATE SCHEMA "Sales Dept";
CREATE TABLE "Sales Dept"."order$lines" (id integer PRIMARY KEY, v text);
INSERT INTO public."my-table" VALUES (1, 'a');
INSERT INTO public."Ünïcode tábla" VALUES (1, 'b');
INSERT INTO public."dot.table" VALUES (1, 'c');
INSERT INTO "Sales Dept"."order$lines" VALUES (1, 'd');
