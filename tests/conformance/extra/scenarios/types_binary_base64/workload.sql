-- the snapshot rows again, through streaming (a temporary table is not replicated)
CREATE TEMP TABLE tmp AS SELECT * FROM bin;
UPDATE tmp SET id = id + 100;
INSERT INTO bin SELECT * FROM tmp;
-- a TOASTed bytea (incompressible: 4 KB of md5 output), then an update that leaves it unchanged
INSERT INTO bin (id, b, big) SELECT 200, '\x03', string_agg(decode(md5(i::text), 'hex'), ''::bytea) FROM generate_series(1, 256) i;
UPDATE bin SET b = '\x04' WHERE id = 200;
SELECT pg_logical_emit_message(true, 'bin', '\xfbff00'::bytea);
DELETE FROM bin WHERE id = 102;
