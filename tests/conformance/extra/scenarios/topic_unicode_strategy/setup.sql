-- SchemaUnicodeTopicNamingStrategy: '_' and invalid characters become _uXXXX (also in the prefix)
CREATE TABLE public.order_items (id integer PRIMARY KEY, v text);
CREATE TABLE public."Ünïcode tábla" (id integer PRIMARY KEY, v text);
CREATE TABLE public."my-table" (id integer PRIMARY KEY, v text);
INSERT INTO public.order_items VALUES (1, 'a');
INSERT INTO public."Ünïcode tábla" VALUES (1, 'b');
INSERT INTO public."my-table" VALUES (1, 'c');
