-- multi-dimensional arrays and arrays with explicit bounds (default modes). Debezium gets pgJDBC's
-- nested Java arrays for a multi-dimensional value: one entry per sub-array of the first
-- dimension, null for these element types (numbers, temporals, bool, bytea, hstore, citext); a
-- NaN/Infinity anywhere in a numeric[] value nulls it. Element types whose entries would be Java
-- identity strings (text, uuid, json, inet, ranges, enum, ...: not deterministic) only get
-- one-dimensional values here: table `bounds` (where a NULL element nulls tsvector[] and enum[]
-- values: their element schemas are required). Rows by the snapshot, the same values again
-- (ids + 100) by streaming.
SET TIME ZONE 'UTC';
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE EXTENSION IF NOT EXISTS ltree;
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TYPE color AS ENUM ('red', 'green', 'dark blue');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TYPE pair AS (a integer, b text);
CREATE TABLE md (
    id         integer PRIMARY KEY,
    a_int2     smallint[],
    a_int4     integer[],
    a_int8     bigint[],
    a_oid      oid[],
    a_f4       real[],
    a_f8       double precision[],
    a_bool     boolean[],
    a_num      numeric(6,2)[],
    a_numu     numeric[],
    a_date     date[],
    a_time     time[],
    a_time3    time(3)[],
    a_timetz   timetz[],
    a_ts       timestamp[],
    a_ts3      timestamp(3)[],
    a_tstz     timestamptz[],
    a_bytea    bytea[],
    a_hstore   hstore[],
    a_citext   citext[],
    a_bit      bit(3)[],
    a_dom      posint[],
    a_comp     pair[],
    a_money    money[],
    a_interval interval[],
    a_int4_nn  integer[] NOT NULL
);
ALTER TABLE md REPLICA IDENTITY FULL;
INSERT INTO md VALUES
  (1, '{{1,-2},{NULL,32767}}', '{{1,2},{3,4}}', '{{9223372036854775807,NULL,-9223372036854775808}}', '{{0,4294967295}}',
      '{{1.5,NaN},{-Infinity,NULL}}', '{{2.718281828459045,-0},{1e-300,Infinity}}', '{{t,f},{NULL,t}}',
      '{{1.5,NULL},{-2.25,0}}', '{{1,2.50},{-0.001,NULL}}', '{{2024-02-29,NULL},{infinity,"0044-03-15 BC"}}',
      '{{13:45:30.123456,NULL},{24:00:00,00:00:00}}', '{{13:45:30.123}}', '{{13:45:30.5+05:30,NULL}}',
      '{{"2024-02-29 13:45:30.123456",NULL},{infinity,-infinity}}', '{{"2024-02-29 13:45:30.123"}}',
      '{{"2024-02-29 13:45:30.123456+02",NULL}}', '{{"\\xdeadbeef","\\x"},{NULL,"\\x00"}}',
      '{{"a=>1","b=>NULL"},{NULL,""}}', '{{MiXeD,"with space"},{NULL,x}}', '{{101,010}}', '{{1,2},{3,4}}',
      ARRAY[ARRAY[ROW(1, 'x')::pair, NULL]], '{{1.50}}', '{{"1 day"}}', '{{1,2},{3,4}}'),
  (2, '[1:2][1:2]={{1,2},{3,4}}', '[0:1][1:2]={{1,NULL},{3,4}}', '[0:1][0:0]={{1},{2}}', '[2:2][2:3]={{1,2}}',
      '[0:1][0:0]={{1.5},{NULL}}', '[-1:0][5:5]={{1.5},{2.5}}', '[0:0][0:1]={{t,NULL}}', '[0:0][0:1]={{1.5,NULL}}',
      '[0:1][1:1]={{1},{NULL}}', '[0:0][0:1]={{2024-02-29,NULL}}', '[0:0][0:0]={{13:45:30}}', '[0:0][0:0]={{13:45:30}}',
      '[0:0][0:0]={{13:45:30+01}}', '[0:0][0:0]={{"2024-02-29 13:45:30"}}', '[0:0][0:0]={{"2024-02-29 13:45:30"}}',
      '[0:0][0:0]={{"2024-02-29 13:45:30+00"}}', '[0:0][0:0]={{"\\xdeadbeef"}}', '[0:0][0:0]={{"a=>1"}}',
      '[0:0][0:0]={{MiXeD}}', '[0:0][0:0]={{101}}', '[0:0][0:1]={{1,2}}', NULL, '[0:0][0:0]={{1.50}}',
      '[0:0][0:0]={{"1 day"}}', '[0:1][1:2]={{1,2},{3,4}}'),
  (3, '{{{1,2},{3,4}},{{5,6},{7,8}}}', '{{{1}},{{2}},{{3}}}', '{{{1,2}}}', '{{{1}}}', '{{{1.5}}}', '{{{1.5}}}',
      '{{{t}}}', '{{{1.5}}}', '{{{1}}}', '{{{2024-02-29}}}', '{{{13:45:30}}}', '{{{13:45:30}}}', '{{{13:45:30+01}}}',
      '{{{"2024-02-29 13:45:30"}}}', '{{{"2024-02-29 13:45:30"}}}', '{{{"2024-02-29 13:45:30+00"}}}',
      '{{{"\\x01"}}}', '{{{"a=>1"}}}', '{{{MiXeD}}}', '{{{101}}}', '{{{1}}}', NULL, '{{{1.50}}}', '{{{"1 day"}}}',
      '{{{1,2}},{{3,4}}}'),
  (4, '[0:2]={7,8,9}', '[0:2]={7,NULL,9}', '[-1:0]={7,8}', '[5:5]={5}', '[0:1]={1.5,NaN}', '[0:1]={-0,Infinity}',
      '[0:1]={t,f}', '[0:1]={1.5,2.25}', '[0:1]={1,2.50}', '[0:1]={2024-02-29,infinity}', '[0:0]={13:45:30.123456}',
      '[0:0]={13:45:30.123}', '[0:0]={13:45:30.5+05:30}', '[0:0]={"2024-02-29 13:45:30.123456"}',
      '[0:0]={"2024-02-29 13:45:30.123"}', '[0:0]={"2024-02-29 13:45:30.123456+02"}', '[0:1]={"\\xdeadbeef",NULL}',
      '[0:0]={"a=>1"}', '[0:0]={MiXeD}', '[0:0]={101}', '[0:1]={1,2}', NULL, '[0:0]={1.50}', '[0:0]={"1 day"}',
      '[0:2]={7,8,9}'),
  (5, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
      '{}', '{}', '{}', '{}', '{}', '{}'),
  (6, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, '{{NULL}}'),
  (7, '{{NULL}}', '{{NULL,NULL},{NULL,NULL}}', '{{NULL}}', NULL, '{{NaN}}', '{{NaN}}', '{{NULL}}', '{{1.5,NaN}}',
      '{{Infinity}}', '{{NULL}}', '{{NULL}}', NULL, NULL, '{{NULL}}', NULL, '{{NULL}}', '{{NULL}}', '{{NULL}}',
      '{{NULL}}', '{{NULL}}', '{{NULL}}', NULL, NULL, NULL, '{{NULL},{NULL},{NULL}}');
CREATE TABLE bounds (
    id      integer PRIMARY KEY,
    a_text  text[],
    a_vc    varchar(5)[],
    a_char  char(3)[],
    a_qchar "char"[],
    a_uuid  uuid[],
    a_json  json[],
    a_jsonb jsonb[],
    a_inet  inet[],
    a_cidr  cidr[],
    a_mac   macaddr[],
    a_mac8  macaddr8[],
    a_i4r   int4range[],
    a_i8r   int8range[],
    a_numr  numrange[],
    a_tsr   tsrange[],
    a_tstzr tstzrange[],
    a_dater daterange[],
    a_tsv   tsvector[],
    a_ltree ltree[],
    a_enum  color[]
);
ALTER TABLE bounds REPLICA IDENTITY FULL;
INSERT INTO bounds VALUES
  (1, '[0:3]={a,"b c",NULL,"{x}"}', '[-2:-1]={abc,"d e"}', '[0:1]={ab,NULL}', '[0:1]={a,b}',
      '[0:1]={a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}', '[0:1]={"{\"a\": 1}","[1, 2]"}', '[0:1]={"{\"b\": 2, \"a\": 1}",null}',
      '[0:1]={192.168.0.1,::1/128}', '[5:5]={10.0.0.0/8}', '[0:0]={08:00:2b:01:02:03}', '[0:0]={08:00:2b:01:02:03:04:05}',
      '[0:1]={"[1,5)",empty}', '[0:0]={"[1,9223372036854775807)"}', '[0:0]={"(1.5,2.5]"}',
      '[0:0]={"[\"2024-01-01 00:00:00\",\"2024-01-02 00:00:00\")"}', '[0:0]={"[\"2024-01-01 00:00:00+00\",infinity)"}',
      '[0:0]={"[2024-01-01,2024-02-01)"}', '[0:0]={"a b"}', '[0:1]={Top.Science,a.b_c}', '[0:1]={red,"dark blue"}'),
  (2, '[1:1]={x}', '[1:1]={x}', '[1:1]={x}', '[1:1]={x}', '[1:1]={a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', '[1:1]={1}',
      '[1:1]={1}', '[1:1]={10.0.0.1}', '[1:1]={10.0.0.0/8}', '[1:1]={08:00:2b:01:02:03}', '[1:1]={08:00:2b:01:02:03:04:05}',
      '[1:1]={empty}', '[1:1]={empty}', '[1:1]={empty}', '[1:1]={empty}', '[1:1]={empty}', '[1:1]={empty}', '[0:1]={x,NULL}',
      '[1:1]={x}', '[0:0]={NULL}'),
  (3, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}'),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL);
