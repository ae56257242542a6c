-- bytea (and bytea[], bit/varbit, a type Debezium does not know, an unchanged TOASTed bytea and a
-- logical decoding message) under binary.handling.mode (see props.txt), with include.unknown.datatypes.
-- Rows 1..4 by the snapshot, the same values again (ids 101..104) by streaming.
CREATE TABLE bin (
    id      integer PRIMARY KEY,
    b       bytea DEFAULT '\x0102',
    b_arr   bytea[],
    bit1    bit(1),
    bit3    bit(3),
    bit10   bit(10),
    vb      varbit,
    vb1     varbit(1),
    vb16    varbit(16),
    lsn     pg_lsn,
    big     bytea
);
INSERT INTO bin VALUES
  (1, '\xdeadbeef00', '{"\\xfbff","\\x00",NULL}', B'1', B'101', B'1000000001', B'1101001', B'1', B'1111000011110000',
      '16/B374D848', '\x01'),
  (2, '\xfbefff', '{}', B'0', B'000', B'0000000000', B'', B'0', B'0', '0/0', '\x'),
  (3, '\x', '{"\\x"}', B'1', B'111', B'1111111111', B'0000000000000000000000000000000001', B'1', B'1', 'FFFFFFFF/FFFFFFFF',
      NULL),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
