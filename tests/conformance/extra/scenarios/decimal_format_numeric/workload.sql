-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM decf;
UPDATE tmp SET id = id + 100;
INSERT INTO decf SELECT * FROM tmp;
UPDATE decf SET n = 99.99 WHERE id = 1.5;
UPDATE decf SET id = 7.5 WHERE id = 3;
DELETE FROM decf WHERE id = 102;
