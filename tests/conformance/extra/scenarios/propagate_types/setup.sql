-- column.propagate.source.type and datatype.propagate.source.type: __debezium.source.column.* parameters
-- (a serial key would show Debezium's SERIAL -> INT4 switch, but also its "default": 0 for nextval columns, which
-- Headwater does not emit yet; see tests/unit/test_column_mappers.py for the type name)
CREATE TABLE public.items (id integer PRIMARY KEY, title varchar(30) NOT NULL, body text, price numeric(10,2),
                           ratio numeric, qty integer, flag boolean, created timestamp(3), code char(4),
                           tags text[], note varchar, big bigint, at timestamptz, d date, f float8);
INSERT INTO public.items (id, title, body, price, ratio, qty, flag, created, code, tags, note, big)
    VALUES (1, 'first', 'body', 12.50, 0.125, 3, true, '2024-01-02 03:04:05.678', 'AB', '{a,b}', 'n', 9);
