-- real (float4) values whose shortest decimal form (PostgreSQL's text, Headwater's output) differs
-- from Java 17's Float.toString (Debezium's JSON): a known difference, see docs/compat.md (Types).
CREATE TABLE f4 (id integer PRIMARY KEY, v real);
INSERT INTO f4 VALUES (1, 1.17549435e-38), (2, 1e-45), (3, 0.1);
