-- key/value.converter.decimal.format=numeric: Connect Decimal values (also a numeric key, the schema
-- default and array elements) written as JSON numbers; VariableScaleDecimal stays a struct with bytes.
-- Rows 1..4 by the snapshot, the same values again (ids + 100) by streaming.
CREATE TABLE decf (
    id      numeric(6,1) PRIMARY KEY,
    n       numeric(10,2) DEFAULT 1.50,
    n0      numeric(12,0),
    nu      numeric,
    m       money DEFAULT 3.25,
    n_arr   numeric(5,3)[]
);
INSERT INTO decf VALUES
  (1.5, 12345678.91, 123456789012, 3.14159, 1234.56, '{1.5,NULL,-2.125}'),
  (2, -0.01, -1, -1e-10, -0.99, '{}'),
  (3, 0, 0, 0, 0, '{0}'),
  (4, NULL, NULL, NULL, NULL, NULL);
