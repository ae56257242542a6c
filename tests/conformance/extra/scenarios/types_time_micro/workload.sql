SET TIME ZONE 'UTC';
-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM tm;
UPDATE tmp SET id = id + 100;
INSERT INTO tm SELECT * FROM tmp;
INSERT INTO tm (id) VALUES (108);
UPDATE tm SET t = '10:00:00', ts = '2001-02-03 04:05:06.7', tz = '10:00:00+01' WHERE id = 1;
DELETE FROM tm WHERE id = 103;
