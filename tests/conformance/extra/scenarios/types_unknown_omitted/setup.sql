-- types Debezium has no mapping for (geometric types other than point, tsquery, txid_snapshot,
-- pg_lsn, a composite type, int2vector, regclass, arrays of domains/composites, bit[], "char"[]):
-- left out, or opaque bytes with include.unknown.datatypes=true (see props.txt).
-- Rows 1..4 by the snapshot, the same values again (ids 101..104) by streaming.
CREATE TYPE pair AS (a integer, b text);
CREATE DOMAIN d_pos AS integer CHECK (VALUE > 0);
CREATE TABLE unk (
    id        integer PRIMARY KEY,
    known     text,
    c_box     box,
    c_circle  circle,
    c_line    line,
    c_lseg    lseg,
    c_path    path,
    c_polygon polygon,
    c_tsq     tsquery,
    c_txid    txid_snapshot,
    c_lsn     pg_lsn,
    c_pair    pair,
    c_i2v     int2vector,
    c_regc    regclass,
    a_dom     d_pos[],
    a_pair    pair[],
    a_bit     bit(3)[],
    a_qchar   "char"[]
);
ALTER TABLE unk REPLICA IDENTITY FULL;
INSERT INTO unk VALUES
  (1, 'one', '((0,0),(1,1))', '<(1,2),3>', '{1,-1,0}', '[(0,0),(1,1)]', '((0,0),(1,1),(2,0))', '((0,0),(1,1),(2,0))',
      'fat & rat', '10:20:10,14,15', '16/B374D848', '(1,"x y")', '1 2 3', 'pg_class', '{1,2,NULL}', '{"(1,a)",NULL}',
      '{101,010}', '{a,b}'),
  (2, 'two', '((-1.5,-2.5),(3,4))', '<(0,0),0.5>', '{0,1,-2}', '[(1,2),(3,4)]', '[(0,0),(1,1)]', '((1,1),(2,2),(3,1))',
      '!a | b', '1:1:', '0/0', '(,)', '', 'unk', '{}', '{}', '{}', '{}'),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (4, 'four', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '0', NULL, '{7,8}',
      ARRAY['(2,"b c")'::pair], '{101}', '{x}');
