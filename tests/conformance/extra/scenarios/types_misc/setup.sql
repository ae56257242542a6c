-- default modes: floats with NaN/+-Infinity/-0, enums, domains (by base type, with their own length/
-- precision, a domain over a domain), network types, tsvector, ltree, citext, uuid, xml, json/jsonb,
-- ranges, char/name/oid/"char". Rows 1..4 by the snapshot, the same values again (ids 101..104) by streaming.
SET TIME ZONE 'UTC';
CREATE EXTENSION IF NOT EXISTS ltree;
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'very happy');
CREATE DOMAIN d_int AS integer CHECK (VALUE > 0);
CREATE DOMAIN d_vc AS varchar(10);
CREATE DOMAIN d_num AS numeric(8,3);
CREATE DOMAIN d_ts AS timestamp(3);
CREATE DOMAIN d_d_num AS d_num;
CREATE TABLE misc (
    id        integer PRIMARY KEY,
    f4        real,
    f8        double precision,
    e         mood DEFAULT 'ok',
    dom_int   d_int,
    dom_vc    d_vc DEFAULT 'dflt',
    dom_num   d_num,
    dom_ts    d_ts,
    dom_dnum  d_d_num,
    c_inet    inet,
    c_cidr    cidr,
    c_mac     macaddr,
    c_mac8    macaddr8,
    c_tsv     tsvector,
    c_ltree   ltree,
    c_citext  citext,
    c_uuid    uuid,
    c_xml     xml,
    c_json    json,
    c_jsonb   jsonb,
    r_int4    int4range,
    r_int8    int8range,
    r_num     numrange,
    r_ts      tsrange,
    r_tstz    tstzrange,
    r_date    daterange,
    c_char    char(3),
    c_name    name,
    c_oid     oid,
    c_qchar   "char",
    c_bool    boolean
);
ALTER TABLE misc REPLICA IDENTITY FULL;
INSERT INTO misc VALUES
  (1, 'NaN', 'NaN', 'sad', 1, 'abc', 12345.678, '2024-01-02 03:04:05.678', 1.5, '192.168.0.1',
      '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', 'a fat cat sat on a mat and ate a fat rat',
      'Top.Science.Astronomy', 'MiXeD Case', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '<a b="1">x &amp; y</a>',
      '{"b": 1, "a": [1, 2.50, "x"]}', '{"b": 1, "a": [1, 2.50, "x"]}', '[1,10)', '(,100]', '[1.5,2.5]',
      '["2024-01-01 00:00:00","2024-01-02 00:00:00")', '["2024-01-01 00:00:00+02",infinity)', '[2024-01-01,2024-01-31]',
      'ab', 'a name', 4294967295, 'x', true),
  (2, 'Infinity', '-Infinity', 'ok', 2147483647, '', -0.001, '1969-12-31 23:59:59.999', 0, '::1',
      '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00:00:00', '', '', '', '00000000-0000-0000-0000-000000000000',
      '<empty/>', '[]', '"scalar"', 'empty', '[-10,-1]', 'empty', '(,)', '(,)', '(2024-01-01,)', '', '', 0, '', false),
  (3, '-Infinity', 'Infinity', 'very happy', 3, 'ünïcödé', 0, 'infinity', -99999.999, '2001:db8::1/64',
      '192.168.100.128/25', '01:02:03:04:05:06', '01:02:03:04:05:06:07:08', 'x:1A y:2B,3C', 'a_b.c1', 'Ünï',
      'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '<?xml version="1.0"?><r/>', 'null', '{"k": null, "n": 1e3}',
      '[-2147483648,2147483647)', '[-9223372036854775808,9223372036854775807)', '(-Infinity,Infinity)',
      '[-infinity,infinity]', '[,)', '[-infinity,2024-01-01)', 'abc', repeat('n', 63), 1, E'\\', NULL),
  (4, '-0', '-0', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (5, 1.5e-38, 2.2250738585072014e-308, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (6, 3.4028235e38, 1.7976931348623157e308, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (7, 0.1, 0.1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (8, 1e-40, 5e-324, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
