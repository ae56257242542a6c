-- numeric/decimal/money under decimal.handling.mode (see props.txt): rows 1..9 by the snapshot,
-- the same values again (ids 101..109) by streaming; REPLICA IDENTITY FULL so before images too.
SET TIME ZONE 'UTC';
CREATE TABLE dec (
    id        integer PRIMARY KEY,
    n_10_2    numeric(10,2) DEFAULT 1.50,
    n         numeric DEFAULT 2.5,
    n_5       numeric(5),
    n_38_10   numeric(38,10),
    d_6_3     decimal(6,3) NOT NULL DEFAULT 0,
    m         money DEFAULT 3.25,
    n_arr     numeric(10,2)[],
    nu_arr    numeric[]
);
ALTER TABLE dec REPLICA IDENTITY FULL;
INSERT INTO dec VALUES
  (1, 12345678.91, 3.14159265358979323846264338327950288, 12345, 1234567890123456789012345678.1234567890,
      123.456, 1234.56, '{1.5,NULL,-2.25}', '{1,2.5,100.000}'),
  (2, -0.01, -123456789012345678901234567890.123456789, -99999, 0.0000000001, -0.001, -0.99, '{}', '{}'),
  (3, 0, 0, 0, 0, 0, 0, '{0}', '{0,0.0,-0.00}'),
  (4, 100.00, 1e20, 10, 1e-10, 999.999, 92233720368547758.07, '{99999999.99}', '{1e-20,1e20}'),
  (5, 0.5, 0.000001, 1, -1, 1, -92233720368547758.08, '{0.01}', '{123456789.123456789}'),
  (6, NULL, NULL, NULL, NULL, 7, NULL, NULL, NULL),
  (7, 'NaN', 'NaN', 'NaN', 'NaN', 'NaN', 0.01, '{NaN,1}', '{NaN,Infinity,-Infinity}'),
  (8, 1, 'Infinity', 1, 1, 1, 1, '{1}', '{Infinity}'),
  (9, 1, '-Infinity', 1, 1, 1, 1, '{1}', '{-Infinity}');
