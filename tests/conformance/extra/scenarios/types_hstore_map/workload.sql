-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM hs;
UPDATE tmp SET id = id + 100;
INSERT INTO hs SELECT * FROM tmp;
-- a TOASTed hstore (incompressible values), then an update that leaves it unchanged
INSERT INTO hs (id, h, note) SELECT 200, hstore(array_agg('k' || i), array_agg(md5(i::text) || md5((i * 7)::text))), 'big'
  FROM generate_series(1, 80) i;
UPDATE hs SET note = 'big, updated' WHERE id = 200;
UPDATE hs SET h = h || 'new=>entry' WHERE id = 1;
DELETE FROM hs WHERE id = 102;
