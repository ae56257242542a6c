SET TIME ZONE 'UTC';
-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM arr;
UPDATE tmp SET id = id + 100;
INSERT INTO arr SELECT * FROM tmp;
UPDATE arr SET a_int4 = '{5}', a_text = '{x}', a_enum = '{green}' WHERE id = 1;
DELETE FROM arr WHERE id = 102;
