-- PostGIS geometry/geography (typed and untyped, with and without SRID, Z/M coordinates, empty and
-- collection values, geometry[]). Rows 1..4 by the snapshot, the same values again (ids 101..104) by streaming.
CREATE EXTENSION IF NOT EXISTS postgis;
CREATE TABLE geo (
    id      integer PRIMARY KEY,
    g       geometry,
    g_pt    geometry(Point, 4326),
    gg      geography,
    gg_pt   geography(Point, 4326),
    g_arr   geometry[]
);
ALTER TABLE geo REPLICA IDENTITY FULL;
INSERT INTO geo VALUES
  (1, 'POINT(1 2)', 'SRID=4326;POINT(-71.06 42.36)', 'POINT(-71.06 42.36)', 'SRID=4326;POINT(2.35 48.85)',
      ARRAY['POINT(1 1)'::geometry, 'SRID=3857;LINESTRING(0 0, 1 1)'::geometry]),
  (2, 'SRID=3857;POLYGON((0 0, 4 0, 4 4, 0 4, 0 0), (1 1, 2 1, 2 2, 1 2, 1 1))', 'SRID=4326;POINT(0 0)',
      'SRID=4326;LINESTRING(-122.33 47.606, 0.0 51.5)', 'POINT(0 0)', '{}'),
  (3, 'GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1))', 'SRID=4326;POINT EMPTY', 'POINT Z (1 2 3)',
      'SRID=4326;POINT(180 -90)', NULL),
  (4, 'POINT ZM (1 2 3 4)', NULL, NULL, NULL, NULL),
  (5, 'LINESTRING EMPTY', NULL, 'MULTIPOINT((1 2), (3 4))', NULL, NULL);
