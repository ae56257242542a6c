-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM unk;
UPDATE tmp SET id = id + 100;
INSERT INTO unk SELECT * FROM tmp;
UPDATE unk SET known = 'uno', c_box = '((5,5),(6,6))' WHERE id = 1;
DELETE FROM unk WHERE id = 102;
