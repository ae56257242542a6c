SET TIME ZONE 'UTC';
-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM dec;
UPDATE tmp SET id = id + 100;
INSERT INTO dec SELECT * FROM tmp;
INSERT INTO dec (id) VALUES (110);
UPDATE dec SET n_10_2 = 42.42, n = 0.1, m = 1.01 WHERE id = 1;
DELETE FROM dec WHERE id = 102;
