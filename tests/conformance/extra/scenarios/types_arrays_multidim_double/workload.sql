SET TIME ZONE 'UTC';
-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp_md AS SELECT * FROM md;
UPDATE tmp_md SET id = id + 100;
INSERT INTO md SELECT * FROM tmp_md;
CREATE TEMP TABLE tmp_bounds AS SELECT * FROM bounds;
UPDATE tmp_bounds SET id = id + 100;
INSERT INTO bounds SELECT * FROM tmp_bounds;
-- an update and a delete of multi-dimensional values (REPLICA IDENTITY FULL: in `before` too)
UPDATE md SET a_int4 = '{{5},{6}}', a_numu = '[0:0]={1.5}', a_int4_nn = '[0:0][0:0]={{7}}' WHERE id = 101;
DELETE FROM md WHERE id = 103;
UPDATE bounds SET a_text = '[0:0]={y}' WHERE id = 101;
