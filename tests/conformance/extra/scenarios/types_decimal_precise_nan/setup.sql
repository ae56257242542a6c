-- NaN and +-Infinity in numeric columns with the default decimal.handling.mode=precise, and
-- NaN/Infinity under double/string in the same run is not possible: see types_decimal_special_*.
SET TIME ZONE 'UTC';
CREATE TABLE decnan (id integer PRIMARY KEY, n_10_2 numeric(10,2), n numeric, m money);
INSERT INTO decnan VALUES (1, 'NaN', 'NaN', 1.5), (2, 1.25, 'Infinity', 2), (3, 2.5, '-Infinity', 3), (4, 3.75, 4.5, 4);
