-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM geo;
UPDATE tmp SET id = id + 100;
INSERT INTO geo SELECT * FROM tmp;
UPDATE geo SET g = 'POINT(9 9)' WHERE id = 1;
DELETE FROM geo WHERE id = 102;
