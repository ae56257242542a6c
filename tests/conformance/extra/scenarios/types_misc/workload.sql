SET TIME ZONE 'UTC';
-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM misc;
UPDATE tmp SET id = id + 100;
INSERT INTO misc SELECT * FROM tmp;
UPDATE misc SET e = 'very happy', dom_vc = 'x', c_jsonb = '{"u": true}' WHERE id = 1;
DELETE FROM misc WHERE id = 102;
