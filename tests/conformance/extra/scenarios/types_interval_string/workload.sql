-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM iv;
UPDATE tmp SET id = id + 100;
INSERT INTO iv SELECT * FROM tmp;
UPDATE iv SET v = '7 days' WHERE id = 1;
DELETE FROM iv WHERE id = 102;
