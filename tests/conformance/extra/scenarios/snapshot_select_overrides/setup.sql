-- snapshot.select.statement.overrides: the snapshot of public.orders reads only the rows its
-- SELECT returns (and in its order); public.items is read in full; streaming is unaffected.
CREATE TABLE public.orders (id integer PRIMARY KEY, status text NOT NULL, total numeric(8,2));
CREATE TABLE public.items (id integer PRIMARY KEY, label text);
INSERT INTO public.orders VALUES (1, 'open', 10.00), (2, 'cancelled', 20.00), (3, 'open', 30.00), (4, 'shipped', 40.00);
INSERT INTO public.items VALUES (1, 'a'), (2, 'b');
