-- column.mask.with.N.chars / column.truncate.to.N.chars on character and non-character columns
CREATE TABLE public.people (id integer PRIMARY KEY, name varchar(20), email text, note text NOT NULL DEFAULT 'n',
                            code char(5), qty integer, short varchar(3), bio varchar, plain text);
INSERT INTO public.people VALUES (1, 'Alexander', 'alex@example.com', 'a long note', 'AB', 7, 'xyz', 'biography', 'kept');
INSERT INTO public.people VALUES (2, NULL, NULL, 'abc', NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.people VALUES (3, 'Zoë Ünïcode', 'z@example.com', 'äöüßéèê', 'ÄÖ', 0, 'ab', '', 'x');
