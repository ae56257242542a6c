"""SQL installed into every backing PostgreSQL database when the SQL Server database is created:
the registry (DESIGN.md), the SQL Server types as domains/composites, the conversion and built-in
functions the translator calls, and the sys.* / INFORMATION_SCHEMA catalog views over the registry.
"""

from __future__ import annotations

REGISTRY_DDL = """
CREATE SCHEMA IF NOT EXISTS hw_emulator;
CREATE TABLE IF NOT EXISTS hw_emulator.objects (
    object_id      int PRIMARY KEY,
    schema_name    text NOT NULL,
    name           text NOT NULL,
    type           char(2) NOT NULL,
    pg_schema      text NOT NULL,
    pg_name        text NOT NULL,
    is_ms_shipped  boolean NOT NULL DEFAULT false,
    create_date    timestamp(3) NOT NULL DEFAULT localtimestamp,
    modify_date    timestamp(3) NOT NULL DEFAULT localtimestamp,
    UNIQUE (schema_name, name)
);
CREATE SEQUENCE IF NOT EXISTS hw_emulator.object_ids START 245575913;
CREATE TABLE IF NOT EXISTS hw_emulator.columns (
    object_id      int NOT NULL REFERENCES hw_emulator.objects ON DELETE CASCADE,
    column_id      int NOT NULL,
    name           text NOT NULL,
    pg_name        text NOT NULL,
    type           text NOT NULL,
    is_nullable    boolean NOT NULL,
    is_identity    boolean NOT NULL DEFAULT false,
    default_definition text,
    PRIMARY KEY (object_id, column_id)
);
CREATE TABLE IF NOT EXISTS hw_emulator.indexes (
    object_id int NOT NULL REFERENCES hw_emulator.objects ON DELETE CASCADE,
    index_id int NOT NULL,
    name text NOT NULL, is_primary_key boolean NOT NULL, is_unique boolean NOT NULL,
    type_desc text NOT NULL,
    column_ids int[] NOT NULL,
    PRIMARY KEY (object_id, index_id)
);
-- schemas as SQL Server numbers them (dbo = 1, sys = 4 …); user schemas from 5
CREATE TABLE IF NOT EXISTS hw_emulator.schemas (
    schema_id int PRIMARY KEY,
    name text NOT NULL UNIQUE,
    pg_name text NOT NULL
);
INSERT INTO hw_emulator.schemas VALUES (1, 'dbo', 'dbo'), (2, 'guest', 'guest'),
    (3, 'INFORMATION_SCHEMA', 'hw_information_schema'), (4, 'sys', 'sys') ON CONFLICT DO NOTHING;
CREATE SEQUENCE IF NOT EXISTS hw_emulator.schema_ids START 5;
-- database-level settings the engine reads (snapshot isolation etc.)
CREATE TABLE IF NOT EXISTS hw_emulator.settings (name text PRIMARY KEY, value text NOT NULL);
-- rowversion values: SQL Server's @@DBTS of a new database is 2000, its first rowversion 0x…07D1
CREATE SEQUENCE IF NOT EXISTS hw_emulator.rowversion START 2001;
"""

# SQL Server's types. Domain CHECK constraint names are mapped to SQL Server errors by errors.py.
TYPES_DDL = r"""
CREATE SCHEMA IF NOT EXISTS sys;
CREATE SCHEMA IF NOT EXISTS dbo;
CREATE SCHEMA IF NOT EXISTS hw_information_schema;
CREATE DOMAIN sys.tinyint AS int2 CONSTRAINT hw_tinyint_range CHECK (VALUE BETWEEN 0 AND 255);
CREATE DOMAIN sys.money AS numeric(19,4)
    CONSTRAINT hw_money_range CHECK (VALUE BETWEEN -922337203685477.5808 AND 922337203685477.5807);
CREATE DOMAIN sys.smallmoney AS numeric(10,4)
    CONSTRAINT hw_smallmoney_range CHECK (VALUE BETWEEN -214748.3648 AND 214748.3647);
CREATE DOMAIN sys.datetime AS timestamp(3);
CREATE DOMAIN sys.smalldatetime AS timestamp(0);
CREATE DOMAIN sys.xml AS text;
CREATE TYPE sys.time_ AS (t time(6), ns100 int2);
CREATE TYPE sys.datetime2 AS (ts timestamp(6), ns100 int2);
CREATE TYPE sys.datetimeoffset AS (utc timestamp(6), ns100 int2, offset_min int2);
CREATE TYPE sys.sql_variant AS (base_type text, value text);

-- T-SQL lets integers stand for bits (WHERE flag = 1, VALUES (1))
UPDATE pg_cast SET castcontext = 'i' WHERE castsource = 'int4'::regtype AND casttarget = 'bool'::regtype;

CREATE FUNCTION sys.hw_raise(msg text, num int, sev int DEFAULT 16, st int DEFAULT 1) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN
  RAISE EXCEPTION USING MESSAGE = msg, DETAIL = format('sqlserver:%s:%s:%s', num, sev, st);
END $$;

-- datetime keeps 1/300 s: .000, .003, .007
CREATE FUNCTION sys.to_datetime(v timestamp) RETURNS sys.datetime LANGUAGE sql IMMUTABLE AS $$
  SELECT (date_trunc('second', v)
          + make_interval(secs => round(extract(microseconds FROM v)::numeric % 1000000 * 300 / 1000000)
                                  / 300.0))::timestamp(3)::sys.datetime $$;
CREATE FUNCTION sys.to_smalldatetime(v timestamp) RETURNS sys.smalldatetime LANGUAGE sql IMMUTABLE AS $$
  SELECT date_trunc('minute', v + interval '30.001 seconds')::sys.smalldatetime $$;
CREATE FUNCTION sys.to_datetime2(v timestamp, scale int DEFAULT 7) RETURNS sys.datetime2
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN v IS NULL THEN NULL ELSE
    ROW(CASE WHEN scale >= 6 THEN v ELSE
          date_trunc('second', v) + make_interval(secs => round(
              (extract(microseconds FROM v)::numeric % 1000000) / 1000000, scale)) END, 0)::sys.datetime2 END $$;
CREATE FUNCTION sys.to_datetime2(v sys.datetime2, scale int DEFAULT 7) RETURNS sys.datetime2
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN scale = 7 OR v IS NULL THEN v
              WHEN scale = 6 THEN
                ROW((v).ts + make_interval(secs => round((v).ns100 / 10.0) / 1000000), 0)::sys.datetime2
              ELSE sys.to_datetime2((v).ts, scale) END $$;
CREATE FUNCTION sys.to_time(v time, scale int DEFAULT 7) RETURNS sys.time_ LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN v IS NULL THEN NULL
    ELSE ROW((sys.to_datetime2('2000-01-01'::date + v, scale)).ts::time, 0)::sys.time_ END $$;
CREATE FUNCTION sys.to_time(v sys.time_, scale int DEFAULT 7) RETURNS sys.time_ LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN scale = 7 OR v IS NULL THEN v ELSE sys.to_time((v).t, scale) END $$;
CREATE FUNCTION sys.to_datetimeoffset(v timestamptz, scale int DEFAULT 7) RETURNS sys.datetimeoffset
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN v IS NULL THEN NULL ELSE ROW((sys.to_datetime2(v AT TIME ZONE 'UTC', scale)).ts, 0,
     (extract(timezone FROM v) / 60)::int2)::sys.datetimeoffset END $$;
CREATE FUNCTION sys.to_datetimeoffset(v sys.datetimeoffset, scale int DEFAULT 7) RETURNS sys.datetimeoffset
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN scale = 7 OR v IS NULL THEN v
    ELSE ROW((sys.to_datetime2((v).utc, scale)).ts, 0, (v).offset_min)::sys.datetimeoffset END $$;
-- the local time a datetimeoffset was written with, as timestamp (µs)
CREATE FUNCTION sys.dto_local(v sys.datetimeoffset) RETURNS timestamp LANGUAGE sql IMMUTABLE AS $$
  SELECT (v).utc + make_interval(mins => (v).offset_min) $$;

CREATE FUNCTION sys.sysdatetime() RETURNS sys.datetime2 LANGUAGE sql STABLE AS $$
  SELECT ROW(clock_timestamp()::timestamp, 0)::sys.datetime2 $$;
CREATE FUNCTION sys.sysutcdatetime() RETURNS sys.datetime2 LANGUAGE sql STABLE AS $$
  SELECT ROW(clock_timestamp() AT TIME ZONE 'UTC', 0)::sys.datetime2 $$;
CREATE FUNCTION sys.sysdatetimeoffset() RETURNS sys.datetimeoffset LANGUAGE sql STABLE AS $$
  SELECT sys.to_datetimeoffset(clock_timestamp()) $$;
CREATE FUNCTION sys.getdate() RETURNS sys.datetime LANGUAGE sql STABLE AS $$
  SELECT sys.to_datetime(clock_timestamp()::timestamp) $$;
CREATE FUNCTION sys.getutcdate() RETURNS sys.datetime LANGUAGE sql STABLE AS $$
  SELECT sys.to_datetime((clock_timestamp() AT TIME ZONE 'UTC')::timestamp) $$;
CREATE FUNCTION sys.todatetimeoffset(v timestamp, offset_min int) RETURNS sys.datetimeoffset
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN v IS NULL THEN NULL ELSE
    ROW(v - make_interval(mins => offset_min), 0, offset_min)::sys.datetimeoffset END $$;
CREATE FUNCTION sys.todatetimeoffset(v sys.datetime2, offset_min int) RETURNS sys.datetimeoffset
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN v IS NULL THEN NULL ELSE
    ROW((v).ts - make_interval(mins => offset_min), (v).ns100, offset_min)::sys.datetimeoffset END $$;
CREATE FUNCTION sys.todatetimeoffset(v timestamp, offset_text text) RETURNS sys.datetimeoffset
LANGUAGE sql IMMUTABLE AS $$
  SELECT sys.todatetimeoffset(v, (CASE WHEN left(offset_text, 1) = '-' THEN -1 ELSE 1 END)
     * (substr(offset_text, 2, 2)::int * 60 + substr(offset_text, 5, 2)::int)) $$;
CREATE FUNCTION sys.datepart_tzoffset(v sys.datetimeoffset) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT (v).offset_min::int $$;
CREATE FUNCTION sys.datepart_tzoffset(v timestamptz) RETURNS int LANGUAGE sql STABLE AS $$
  SELECT (extract(timezone FROM v) / 60)::int $$;

CREATE FUNCTION sys.variant_text(v sys.sql_variant) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT (v).value $$;
CREATE FUNCTION sys.ts(v text) RETURNS timestamp LANGUAGE sql STABLE AS $$ SELECT v::timestamp $$;
CREATE FUNCTION sys.to_datetime2(v text, scale int DEFAULT 7) RETURNS sys.datetime2 LANGUAGE sql STABLE AS $$
  SELECT sys.to_datetime2(v::timestamp, scale) $$;
CREATE FUNCTION sys.to_datetime2(v date, scale int DEFAULT 7) RETURNS sys.datetime2 LANGUAGE sql IMMUTABLE AS $$
  SELECT sys.to_datetime2(v::timestamp, scale) $$;
CREATE FUNCTION sys.to_datetime2(v sys.datetimeoffset, scale int DEFAULT 7) RETURNS sys.datetime2
LANGUAGE sql IMMUTABLE AS $$ SELECT sys.to_datetime2(ROW(sys.dto_local(v), (v).ns100)::sys.datetime2, scale) $$;
CREATE FUNCTION sys.to_time(v text, scale int DEFAULT 7) RETURNS sys.time_ LANGUAGE sql STABLE AS $$
  SELECT sys.to_time(v::time, scale) $$;
CREATE FUNCTION sys.to_time(v timestamp, scale int DEFAULT 7) RETURNS sys.time_ LANGUAGE sql IMMUTABLE AS $$
  SELECT sys.to_time(v::time, scale) $$;
CREATE FUNCTION sys.to_time(v sys.datetime2, scale int DEFAULT 7) RETURNS sys.time_ LANGUAGE sql IMMUTABLE AS $$
  SELECT sys.to_time(ROW((v).ts::time, (v).ns100)::sys.time_, scale) $$;
CREATE FUNCTION sys.to_datetimeoffset(v text, scale int DEFAULT 7) RETURNS sys.datetimeoffset
LANGUAGE sql STABLE AS $$ SELECT sys.to_datetimeoffset(v::timestamptz, scale) $$;
CREATE FUNCTION sys.to_datetimeoffset(v timestamp, scale int DEFAULT 7) RETURNS sys.datetimeoffset
LANGUAGE sql IMMUTABLE AS $$ SELECT sys.todatetimeoffset((sys.to_datetime2(v, scale)).ts, 0) $$;
CREATE FUNCTION sys.to_datetimeoffset(v sys.datetime2, scale int DEFAULT 7) RETURNS sys.datetimeoffset
LANGUAGE sql IMMUTABLE AS $$ SELECT sys.todatetimeoffset(sys.to_datetime2(v, scale), 0) $$;

-- datetimeoffset compares instants, whatever the offsets (public: operators resolve on search_path)
CREATE FUNCTION public.hw_dto_cmp(a sys.datetimeoffset, b sys.datetimeoffset) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN (a).utc < (b).utc OR (a).utc = (b).utc AND (a).ns100 < (b).ns100 THEN -1
              WHEN (a).utc = (b).utc AND (a).ns100 = (b).ns100 THEN 0 ELSE 1 END $$;
CREATE FUNCTION public.hw_dt2_cmp(a sys.datetime2, b sys.datetime2) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN (a).ts < (b).ts OR (a).ts = (b).ts AND (a).ns100 < (b).ns100 THEN -1
              WHEN (a).ts = (b).ts AND (a).ns100 = (b).ns100 THEN 0 ELSE 1 END $$;
CREATE FUNCTION public.hw_time_cmp(a sys.time_, b sys.time_) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN (a).t < (b).t OR (a).t = (b).t AND (a).ns100 < (b).ns100 THEN -1
              WHEN (a).t = (b).t AND (a).ns100 = (b).ns100 THEN 0 ELSE 1 END $$;
-- REPLICATE(binary, n) (sqlglot writes repeat(); PostgreSQL has it for text only)
CREATE FUNCTION public.repeat(v bytea, n int) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT decode(repeat(encode(v, 'hex'), n), 'hex') $$;
""" + "".join(
    f"""CREATE FUNCTION public.hw_{short}_{op}(a {typ}, b {typ}) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT public.hw_{short}_cmp(a, b) {sym} 0 $$;
CREATE OPERATOR public.{sym} (LEFTARG = {typ}, RIGHTARG = {typ}, FUNCTION = public.hw_{short}_{op},
  COMMUTATOR = {com}, NEGATOR = {neg});
"""
    for short, typ in (("dto", "sys.datetimeoffset"), ("dt2", "sys.datetime2"), ("time", "sys.time_"))
    for op, sym, com, neg in (("eq", "=", "=", "<>"), ("ne", "<>", "<>", "="), ("lt", "<", ">", ">="),
                              ("le", "<=", ">=", ">"), ("gt", ">", "<", "<="), ("ge", ">=", "<=", "<"))
) + r"""
-- composite → timestamp for date arithmetic and DATEPART
CREATE FUNCTION sys.ts(v sys.datetime2) RETURNS timestamp LANGUAGE sql IMMUTABLE AS $$ SELECT (v).ts $$;
CREATE FUNCTION sys.ts(v timestamp) RETURNS timestamp LANGUAGE sql IMMUTABLE AS $$ SELECT v $$;
CREATE FUNCTION sys.ts(v date) RETURNS timestamp LANGUAGE sql IMMUTABLE AS $$ SELECT v::timestamp $$;
CREATE FUNCTION sys.ts(v sys.datetimeoffset) RETURNS timestamp LANGUAGE sql IMMUTABLE AS $$ SELECT sys.dto_local(v) $$;
CREATE FUNCTION sys.ts(v timestamptz) RETURNS timestamp LANGUAGE sql STABLE AS $$ SELECT v::timestamp $$;

-- string/binary length checks: SQL Server 2019+ error 2628 names the table, column and value
CREATE FUNCTION sys.hw_check_len(v text, n int, tbl text, col text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF v IS NOT NULL AND n >= 0 AND length(rtrim(v, ' ')) > n THEN
    PERFORM sys.hw_raise(format('String or binary data would be truncated in table ''%s'', column ''%s''. '
                                'Truncated value: ''%s''.', tbl, col, left(v, n)), 2628, 16, 1);
  END IF;
  RETURN CASE WHEN v IS NOT NULL AND length(v) > n AND n >= 0 THEN left(v, n) ELSE v END;
END $$;
CREATE FUNCTION sys.hw_check_bin(v bytea, n int, pad boolean, tbl text, col text) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF v IS NOT NULL AND n >= 0 AND length(v) > n THEN
    PERFORM sys.hw_raise(format('String or binary data would be truncated in table ''%s'', column ''%s''. '
                                'Truncated value: ''''.', tbl, col), 2628, 16, 1);
  END IF;
  IF v IS NOT NULL AND pad AND length(v) < n THEN
    RETURN v || decode(repeat('00', n - length(v)), 'hex');
  END IF;
  RETURN v;
END $$;

CREATE FUNCTION sys.to_tinyint(v numeric) RETURNS sys.tinyint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF v IS NOT NULL AND (v < 0 OR v > 255) THEN
    PERFORM sys.hw_raise(format('Arithmetic overflow error for data type tinyint, value = %s.', trunc(v)), 220, 16, 1);
  END IF;
  RETURN trunc(v)::int2;
END $$;

CREATE FUNCTION sys.hw_divide_by_zero() RETURNS void LANGUAGE sql AS $$
  SELECT sys.hw_raise('Divide by zero error encountered.', 8134, 16, 1) $$;

CREATE FUNCTION sys.hw_rowversion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW := json_populate_record(NEW, json_build_object(TG_ARGV[0],
           '\x' || lpad(to_hex(nextval('hw_emulator.rowversion')), 16, '0')));
  RETURN NEW;
END $$;

-- the composites take part in date arithmetic (DATEADD, DATEDIFF, YEAR()…) as timestamps
CREATE FUNCTION sys.dto_instant(v sys.datetimeoffset) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
  SELECT ((v).utc AT TIME ZONE 'UTC') $$;
CREATE FUNCTION sys.time_value(v sys.time_) RETURNS time LANGUAGE sql IMMUTABLE AS $$ SELECT (v).t $$;
CREATE FUNCTION sys.dt2_date(v sys.datetime2) RETURNS date LANGUAGE sql IMMUTABLE AS $$ SELECT (v).ts::date $$;
CREATE FUNCTION sys.dto_date(v sys.datetimeoffset) RETURNS date LANGUAGE sql IMMUTABLE AS $$
  SELECT sys.dto_local(v)::date $$;
CREATE CAST (sys.datetime2 AS timestamp) WITH FUNCTION sys.ts(sys.datetime2) AS IMPLICIT;
CREATE CAST (sys.datetime2 AS date) WITH FUNCTION sys.dt2_date(sys.datetime2);
CREATE CAST (sys.datetimeoffset AS timestamptz) WITH FUNCTION sys.dto_instant(sys.datetimeoffset) AS IMPLICIT;
CREATE CAST (sys.datetimeoffset AS date) WITH FUNCTION sys.dto_date(sys.datetimeoffset);
CREATE CAST (sys.time_ AS time) WITH FUNCTION sys.time_value(sys.time_) AS IMPLICIT;

-- CAST(x AS [n]varchar): SQL Server's text forms for the temporal types (ISO 121/126 style)
-- (no boolean overload: integers convert to boolean implicitly here, it would make calls ambiguous)
CREATE FUNCTION sys.hw_text(v anyelement) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN pg_typeof(v) = 'boolean'::regtype THEN CASE WHEN v::text = 'true' THEN '1' ELSE '0' END
              ELSE v::text END $$;
CREATE FUNCTION sys.hw_text(v text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT v $$;
CREATE FUNCTION sys.hw_text(v timestamp) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char(v, 'YYYY-MM-DD HH24:MI:SS.MS') $$;
CREATE FUNCTION sys.hw_text(v sys.datetime2) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char((v).ts, 'YYYY-MM-DD HH24:MI:SS.US') || (v).ns100::text $$;
CREATE FUNCTION sys.hw_text(v sys.time_) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char('2000-01-01'::date + (v).t, 'HH24:MI:SS.US') || (v).ns100::text $$;
CREATE FUNCTION sys.hw_text(v sys.datetimeoffset) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char(sys.dto_local(v), 'YYYY-MM-DD HH24:MI:SS.US') || (v).ns100::text || ' '
         || CASE WHEN (v).offset_min < 0 THEN '-' ELSE '+' END
         || lpad((abs((v).offset_min) / 60)::text, 2, '0') || ':' || lpad((abs((v).offset_min) % 60)::text, 2, '0') $$;
CREATE FUNCTION sys.hw_text(v bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT convert_from(v, 'LATIN1') $$;

"""


# The sys.* catalog views over the registry (database-scoped ones; server-scoped ones are injected
# by the engine as derived tables). Column names/types follow SQL Server's documentation.
CATALOG_DDL = r"""
-- PRIMARY KEY / UNIQUE constraints exist in pg_constraint under their SQL Server name; unique
-- indexes (CREATE UNIQUE INDEX) do not
CREATE FUNCTION sys.hw_is_constraint(n text) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conname = n AND contype IN ('p', 'u')) $$;
CREATE FUNCTION sys.hw_type_name(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT lower(split_part(t, '(', 1)) $$;
CREATE FUNCTION sys.hw_type_id(t text) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE sys.hw_type_name(t)
    WHEN 'image' THEN 34 WHEN 'text' THEN 35 WHEN 'uniqueidentifier' THEN 36 WHEN 'date' THEN 40
    WHEN 'time' THEN 41 WHEN 'datetime2' THEN 42 WHEN 'datetimeoffset' THEN 43 WHEN 'tinyint' THEN 48
    WHEN 'smallint' THEN 52 WHEN 'int' THEN 56 WHEN 'smalldatetime' THEN 58 WHEN 'real' THEN 59
    WHEN 'money' THEN 60 WHEN 'datetime' THEN 61 WHEN 'float' THEN 62 WHEN 'sql_variant' THEN 98
    WHEN 'ntext' THEN 99 WHEN 'bit' THEN 104 WHEN 'decimal' THEN 106 WHEN 'numeric' THEN 108
    WHEN 'smallmoney' THEN 122 WHEN 'bigint' THEN 127 WHEN 'varbinary' THEN 165 WHEN 'varchar' THEN 167
    WHEN 'binary' THEN 173 WHEN 'char' THEN 175 WHEN 'timestamp' THEN 189 WHEN 'nvarchar' THEN 231
    WHEN 'nchar' THEN 239 WHEN 'xml' THEN 241 WHEN 'sysname' THEN 231 ELSE 0 END $$;
-- the first number in parentheses: length (chars) or precision or time scale
CREATE FUNCTION sys.hw_type_arg(t text, i int) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN t !~ '\(' THEN NULL
              WHEN lower(split_part(split_part(split_part(t, '(', 2), ')', 1), ',', i)) = 'max' THEN -1
              WHEN split_part(split_part(split_part(t, '(', 2), ')', 1), ',', i) = '' THEN NULL
              ELSE trim(split_part(split_part(split_part(t, '(', 2), ')', 1), ',', i))::int END $$;
CREATE FUNCTION sys.hw_max_length(t text) RETURNS int2 LANGUAGE sql IMMUTABLE AS $$
  SELECT (CASE sys.hw_type_name(t)
    WHEN 'bit' THEN 1 WHEN 'tinyint' THEN 1 WHEN 'smallint' THEN 2 WHEN 'int' THEN 4 WHEN 'bigint' THEN 8
    WHEN 'real' THEN 4 WHEN 'float' THEN 8 WHEN 'money' THEN 8 WHEN 'smallmoney' THEN 4 WHEN 'date' THEN 3
    WHEN 'datetime' THEN 8 WHEN 'smalldatetime' THEN 4 WHEN 'uniqueidentifier' THEN 16 WHEN 'text' THEN 16
    WHEN 'ntext' THEN 16 WHEN 'image' THEN 16 WHEN 'xml' THEN -1 WHEN 'sql_variant' THEN 8016
    WHEN 'timestamp' THEN 8
    WHEN 'decimal' THEN CASE WHEN coalesce(sys.hw_type_arg(t, 1), 18) <= 9 THEN 5
                             WHEN coalesce(sys.hw_type_arg(t, 1), 18) <= 19 THEN 9
                             WHEN coalesce(sys.hw_type_arg(t, 1), 18) <= 28 THEN 13 ELSE 17 END
    WHEN 'numeric' THEN CASE WHEN coalesce(sys.hw_type_arg(t, 1), 18) <= 9 THEN 5
                             WHEN coalesce(sys.hw_type_arg(t, 1), 18) <= 19 THEN 9
                             WHEN coalesce(sys.hw_type_arg(t, 1), 18) <= 28 THEN 13 ELSE 17 END
    WHEN 'time' THEN CASE WHEN coalesce(sys.hw_type_arg(t, 1), 7) <= 2 THEN 3
                          WHEN coalesce(sys.hw_type_arg(t, 1), 7) <= 4 THEN 4 ELSE 5 END
    WHEN 'datetime2' THEN CASE WHEN coalesce(sys.hw_type_arg(t, 1), 7) <= 2 THEN 6
                          WHEN coalesce(sys.hw_type_arg(t, 1), 7) <= 4 THEN 7 ELSE 8 END
    WHEN 'datetimeoffset' THEN CASE WHEN coalesce(sys.hw_type_arg(t, 1), 7) <= 2 THEN 8
                          WHEN coalesce(sys.hw_type_arg(t, 1), 7) <= 4 THEN 9 ELSE 10 END
    WHEN 'nchar' THEN 2 * coalesce(sys.hw_type_arg(t, 1), 1)
    WHEN 'nvarchar' THEN CASE WHEN sys.hw_type_arg(t, 1) = -1 THEN -1 ELSE 2 * coalesce(sys.hw_type_arg(t, 1), 1) END
    ELSE coalesce(sys.hw_type_arg(t, 1), 1) END)::int2 $$;
CREATE FUNCTION sys.hw_precision(t text) RETURNS int2 LANGUAGE sql IMMUTABLE AS $$
  SELECT (CASE sys.hw_type_name(t)
    WHEN 'bit' THEN 1 WHEN 'tinyint' THEN 3 WHEN 'smallint' THEN 5 WHEN 'int' THEN 10 WHEN 'bigint' THEN 19
    WHEN 'real' THEN 24 WHEN 'float' THEN 53 WHEN 'money' THEN 19 WHEN 'smallmoney' THEN 10
    WHEN 'decimal' THEN coalesce(sys.hw_type_arg(t, 1), 18) WHEN 'numeric' THEN coalesce(sys.hw_type_arg(t, 1), 18)
    WHEN 'date' THEN 10 WHEN 'datetime' THEN 23 WHEN 'smalldatetime' THEN 16
    WHEN 'time' THEN CASE WHEN coalesce(sys.hw_type_arg(t, 1), 7) = 0 THEN 8
                          ELSE 9 + coalesce(sys.hw_type_arg(t, 1), 7) END
    WHEN 'datetime2' THEN CASE WHEN coalesce(sys.hw_type_arg(t, 1), 7) = 0 THEN 19
                          ELSE 20 + coalesce(sys.hw_type_arg(t, 1), 7) END
    WHEN 'datetimeoffset' THEN CASE WHEN coalesce(sys.hw_type_arg(t, 1), 7) = 0 THEN 26
                          ELSE 27 + coalesce(sys.hw_type_arg(t, 1), 7) END
    ELSE 0 END)::int2 $$;
CREATE FUNCTION sys.hw_scale(t text) RETURNS int2 LANGUAGE sql IMMUTABLE AS $$
  SELECT (CASE sys.hw_type_name(t)
    WHEN 'decimal' THEN coalesce(sys.hw_type_arg(t, 2), 0) WHEN 'numeric' THEN coalesce(sys.hw_type_arg(t, 2), 0)
    WHEN 'money' THEN 4 WHEN 'smallmoney' THEN 4 WHEN 'datetime' THEN 3
    WHEN 'time' THEN coalesce(sys.hw_type_arg(t, 1), 7) WHEN 'datetime2' THEN coalesce(sys.hw_type_arg(t, 1), 7)
    WHEN 'datetimeoffset' THEN coalesce(sys.hw_type_arg(t, 1), 7)
    ELSE 0 END)::int2 $$;

CREATE VIEW sys.schemas AS
  SELECT name::varchar(128) AS name, schema_id, 1 AS principal_id FROM hw_emulator.schemas;
CREATE VIEW sys.objects AS
  SELECT o.name::varchar(128) AS name, o.object_id, NULL::int AS principal_id, s.schema_id,
         0 AS parent_object_id, o.type::char(2) AS type,
         (CASE o.type WHEN 'U ' THEN 'USER_TABLE' WHEN 'V ' THEN 'VIEW' WHEN 'P ' THEN 'SQL_STORED_PROCEDURE'
           WHEN 'IF' THEN 'SQL_INLINE_TABLE_VALUED_FUNCTION' WHEN 'FN' THEN 'SQL_SCALAR_FUNCTION'
           WHEN 'S ' THEN 'SYSTEM_TABLE' ELSE 'USER_TABLE' END)::varchar(60) AS type_desc,
         o.create_date::sys.datetime AS create_date, o.modify_date::sys.datetime AS modify_date,
         o.is_ms_shipped, false AS is_published, false AS is_schema_published
  FROM hw_emulator.objects o JOIN hw_emulator.schemas s ON lower(s.name) = lower(o.schema_name)
  WHERE o.type NOT IN ('PK', 'UQ')
  UNION ALL
  SELECT i.name::varchar(128), (o.object_id * 0 + 1000000000 + o.object_id % 100000 * 100 + i.index_id)::int,
         NULL::int, s.schema_id, o.object_id,
         (CASE WHEN i.is_primary_key THEN 'PK' ELSE 'UQ' END)::char(2),
         (CASE WHEN i.is_primary_key THEN 'PRIMARY_KEY_CONSTRAINT' ELSE 'UNIQUE_CONSTRAINT' END)::varchar(60),
         o.create_date::sys.datetime, o.modify_date::sys.datetime, false, false, false
  FROM hw_emulator.indexes i JOIN hw_emulator.objects o USING (object_id)
       JOIN hw_emulator.schemas s ON lower(s.name) = lower(o.schema_name)
  WHERE i.is_primary_key OR sys.hw_is_constraint(i.name);
CREATE VIEW sys.all_objects AS SELECT * FROM sys.objects;
CREATE VIEW sys.tables AS
  SELECT o.name, o.object_id, o.principal_id, o.schema_id, o.parent_object_id, o.type, o.type_desc,
         o.create_date, o.modify_date, o.is_ms_shipped, o.is_published, o.is_schema_published,
         0 AS lob_data_space_id, NULL::int AS filestream_data_space_id, 0 AS max_column_id_used,
         false AS lock_on_bulk_load, true AS uses_ansi_nulls, false AS is_replicated,
         false AS has_replication_filter, false AS is_merge_published, false AS is_sync_tran_subscribed,
         false AS has_unchecked_assembly_data, 0 AS text_in_row_limit, false AS large_value_types_out_of_row,
         EXISTS (SELECT 1 FROM pg_catalog.pg_tables t WHERE t.schemaname = 'cdc' AND t.tablename = 'change_tables')
           AND sys.hw_is_tracked(o.object_id) AS is_tracked_by_cdc,
         0::sys.tinyint AS lock_escalation, 'TABLE'::varchar(60) AS lock_escalation_desc,
         false AS is_filetable, false AS is_memory_optimized, 0::sys.tinyint AS durability,
         'SCHEMA_AND_DATA'::varchar(60) AS durability_desc, 0::sys.tinyint AS temporal_type,
         'NON_TEMPORAL_TABLE'::varchar(60) AS temporal_type_desc, NULL::int AS history_table_id,
         false AS is_remote_data_archive_enabled, false AS is_external, false AS is_node, false AS is_edge
  FROM sys.objects o WHERE o.type = 'U ' AND NOT o.is_ms_shipped;
CREATE VIEW sys.types AS
  SELECT v.name::varchar(128) AS name, v.id::sys.tinyint AS system_type_id, v.id AS user_type_id, 4 AS schema_id,
         NULL::int AS principal_id, sys.hw_max_length(v.name) AS max_length,
         sys.hw_precision(v.name)::sys.tinyint AS precision, sys.hw_scale(v.name)::sys.tinyint AS scale,
         CASE WHEN v.name IN ('char','varchar','text','nchar','nvarchar','ntext','sysname')
              THEN 'SQL_Latin1_General_CP1_CI_AS' END::varchar(128) AS collation_name,
         true AS is_nullable, false AS is_user_defined, false AS is_assembly_type,
         0 AS default_object_id, 0 AS rule_object_id, false AS is_table_type
  FROM (VALUES ('image',34),('text',35),('uniqueidentifier',36),('date',40),('time',41),('datetime2',42),
    ('datetimeoffset',43),('tinyint',48),('smallint',52),('int',56),('smalldatetime',58),('real',59),
    ('money',60),('datetime',61),('float',62),('sql_variant',98),('ntext',99),('bit',104),('decimal',106),
    ('numeric',108),('smallmoney',122),('bigint',127),('varbinary',165),('varchar',167),('binary',173),
    ('char',175),('timestamp',189),('nvarchar',231),('nchar',239),('xml',241)) AS v(name, id)
  UNION ALL SELECT 'sysname'::varchar(128), 231::sys.tinyint, 256, 4, NULL, 256::int2, 0::sys.tinyint, 0::sys.tinyint,
    'SQL_Latin1_General_CP1_CI_AS'::varchar(128), false, false, false, 0, 0, false;
CREATE VIEW sys.default_constraints AS
  SELECT ('DF__' || left(o.name, 9) || '__' || left(c.name, 5) || '__'
          || upper(lpad(to_hex((1500000000 + c.object_id % 1000000 * 100 + c.column_id)::int), 8, '0')))::varchar(128)
           AS name,
         (1500000000 + c.object_id % 1000000 * 100 + c.column_id)::int AS object_id, NULL::int AS principal_id,
         s.schema_id, c.object_id AS parent_object_id, 'D '::char(2) AS type,
         'DEFAULT_CONSTRAINT'::varchar(60) AS type_desc, o.create_date::sys.datetime AS create_date,
         o.modify_date::sys.datetime AS modify_date, false AS is_ms_shipped, false AS is_published,
         false AS is_schema_published, c.column_id AS parent_column_id, c.default_definition::text AS definition,
         false AS is_system_named
  FROM hw_emulator.columns c JOIN hw_emulator.objects o USING (object_id)
       JOIN hw_emulator.schemas s ON lower(s.name) = lower(o.schema_name)
  WHERE c.default_definition IS NOT NULL;
CREATE VIEW sys.columns AS
  SELECT c.object_id, c.name::varchar(128) AS name, c.column_id, sys.hw_type_id(c.type)::sys.tinyint AS system_type_id,
         sys.hw_type_id(c.type) AS user_type_id, sys.hw_max_length(c.type) AS max_length,
         sys.hw_precision(c.type)::sys.tinyint AS precision, sys.hw_scale(c.type)::sys.tinyint AS scale,
         CASE WHEN sys.hw_type_name(c.type) IN ('char','varchar','text','nchar','nvarchar','ntext')
              THEN 'SQL_Latin1_General_CP1_CI_AS' END::varchar(128) AS collation_name,
         c.is_nullable, false AS is_ansi_padded, false AS is_rowguidcol, c.is_identity,
         false AS is_computed, false AS is_filestream, false AS is_replicated, false AS is_non_sql_subscribed,
         false AS is_merge_published, false AS is_dts_replicated, false AS is_xml_document,
         0 AS xml_collection_id,
         coalesce((SELECT d.object_id FROM sys.default_constraints d
                   WHERE d.parent_object_id = c.object_id AND d.parent_column_id = c.column_id), 0)
           AS default_object_id,
         0 AS rule_object_id, false AS is_sparse, false AS is_column_set, 0::sys.tinyint AS generated_always_type,
         'NOT_APPLICABLE'::varchar(60) AS generated_always_type_desc, false AS is_hidden, false AS is_masked
  FROM hw_emulator.columns c;
CREATE VIEW sys.all_columns AS SELECT * FROM sys.columns;
CREATE VIEW sys.identity_columns AS
  SELECT c.*, ROW(sys.hw_type_name(hc.type), q.start_value::text)::sys.sql_variant AS seed_value,
         ROW(sys.hw_type_name(hc.type), q.increment_by::text)::sys.sql_variant AS increment_value,
         CASE WHEN q.last_value IS NOT NULL THEN ROW(sys.hw_type_name(hc.type), q.last_value::text)::sys.sql_variant
         END AS last_value, false AS is_not_for_replication
  FROM sys.columns c JOIN hw_emulator.columns hc ON hc.object_id = c.object_id AND hc.column_id = c.column_id
       JOIN hw_emulator.objects o ON o.object_id = c.object_id
       LEFT JOIN pg_catalog.pg_sequences q
         ON (quote_ident(q.schemaname) || '.' || quote_ident(q.sequencename))::regclass
            = pg_get_serial_sequence(quote_ident(o.pg_schema) || '.' || quote_ident(o.pg_name), hc.pg_name)::regclass
  WHERE c.is_identity;
CREATE VIEW sys.indexes AS
  SELECT i.object_id, i.name::varchar(128) AS name, i.index_id,
         (CASE WHEN i.type_desc = 'CLUSTERED' THEN 1 ELSE 2 END)::sys.tinyint AS type,
         (CASE WHEN i.type_desc = 'CLUSTERED' THEN 'CLUSTERED' ELSE 'NONCLUSTERED' END)::varchar(60) AS type_desc,
         i.is_unique, 1 AS data_space_id, false AS ignore_dup_key, i.is_primary_key,
         (NOT i.is_primary_key AND sys.hw_is_constraint(i.name)) AS is_unique_constraint,
         0::sys.tinyint AS fill_factor, false AS is_padded, false AS is_disabled, false AS is_hypothetical,
         false AS is_ignored_in_optimization, true AS allow_row_locks, true AS allow_page_locks,
         false AS has_filter, NULL::text AS filter_definition
  FROM hw_emulator.indexes i
  UNION ALL
  SELECT o.object_id, NULL, 0, 0::sys.tinyint, 'HEAP', false, 1, false, false, false, 0::sys.tinyint, false,
         false, false, false, true, true, false, NULL
  FROM hw_emulator.objects o WHERE o.type = 'U '
    AND NOT EXISTS (SELECT 1 FROM hw_emulator.indexes i WHERE i.object_id = o.object_id AND i.type_desc = 'CLUSTERED');
CREATE VIEW sys.index_columns AS
  SELECT i.object_id, i.index_id, k.ord::int AS index_column_id, k.column_id, k.ord::sys.tinyint AS key_ordinal,
         0::sys.tinyint AS partition_ordinal, false AS is_descending_key, false AS is_included_column,
         0::sys.tinyint AS column_store_order_ordinal
  FROM hw_emulator.indexes i, unnest(i.column_ids) WITH ORDINALITY AS k(column_id, ord);
CREATE VIEW sys.key_constraints AS
  SELECT i.name::varchar(128) AS name, (1000000000 + i.object_id % 100000 * 100 + i.index_id)::int AS object_id,
         NULL::int AS principal_id, s.schema_id, i.object_id AS parent_object_id,
         (CASE WHEN i.is_primary_key THEN 'PK' ELSE 'UQ' END)::char(2) AS type,
         (CASE WHEN i.is_primary_key THEN 'PRIMARY_KEY_CONSTRAINT' ELSE 'UNIQUE_CONSTRAINT' END)::varchar(60)
           AS type_desc,
         o.create_date::sys.datetime AS create_date, o.modify_date::sys.datetime AS modify_date,
         false AS is_ms_shipped, false AS is_published, false AS is_schema_published, i.index_id AS unique_index_id,
         false AS is_system_named, true AS is_enforced
  FROM hw_emulator.indexes i JOIN hw_emulator.objects o USING (object_id)
       JOIN hw_emulator.schemas s ON lower(s.name) = lower(o.schema_name)
  WHERE i.is_primary_key OR sys.hw_is_constraint(i.name);

CREATE VIEW hw_information_schema.tables AS
  SELECT current_database()::varchar(128) AS table_catalog, o.schema_name::varchar(128) AS table_schema,
         o.name::varchar(128) AS table_name,
         (CASE WHEN o.type = 'V ' THEN 'VIEW' ELSE 'BASE TABLE' END)::varchar(10) AS table_type
  FROM hw_emulator.objects o WHERE o.type IN ('U ', 'V ') AND NOT o.is_ms_shipped;
CREATE VIEW hw_information_schema.columns AS
  SELECT current_database()::varchar(128) AS table_catalog, o.schema_name::varchar(128) AS table_schema,
         o.name::varchar(128) AS table_name, c.name::varchar(128) AS column_name, c.column_id AS ordinal_position,
         c.default_definition::varchar(4000) AS column_default,
         (CASE WHEN c.is_nullable THEN 'YES' ELSE 'NO' END)::varchar(3) AS is_nullable,
         sys.hw_type_name(c.type)::varchar(128) AS data_type,
         CASE WHEN sys.hw_type_name(c.type) IN ('char','varchar','nchar','nvarchar','binary','varbinary')
              THEN coalesce(sys.hw_type_arg(c.type, 1), 1)
              WHEN sys.hw_type_name(c.type) IN ('text', 'image') THEN 2147483647
              WHEN sys.hw_type_name(c.type) = 'ntext' THEN 1073741823 WHEN sys.hw_type_name(c.type) = 'xml' THEN -1 END
           AS character_maximum_length,
         CASE WHEN sys.hw_type_name(c.type) IN ('char','varchar','binary','varbinary')
              THEN coalesce(sys.hw_type_arg(c.type, 1), 1)
              WHEN sys.hw_type_name(c.type) IN ('nchar','nvarchar') THEN
                CASE WHEN sys.hw_type_arg(c.type, 1) = -1 THEN -1 ELSE 2 * coalesce(sys.hw_type_arg(c.type, 1), 1) END
              WHEN sys.hw_type_name(c.type) IN ('text', 'image', 'ntext') THEN 2147483647
              WHEN sys.hw_type_name(c.type) = 'xml' THEN -1 END AS character_octet_length,
         CASE WHEN sys.hw_type_name(c.type) IN ('tinyint','smallint','int','bigint','real','float','money',
              'smallmoney','decimal','numeric') THEN sys.hw_precision(c.type)::sys.tinyint END AS numeric_precision,
         CASE WHEN sys.hw_type_name(c.type) IN ('tinyint','smallint','int','bigint','money','smallmoney','decimal',
              'numeric') THEN (CASE WHEN sys.hw_type_name(c.type) IN ('real','float') THEN 2 ELSE 10 END)::int2 END
           AS numeric_precision_radix,
         CASE WHEN sys.hw_type_name(c.type) IN ('tinyint','smallint','int','bigint','money','smallmoney','decimal',
              'numeric') THEN sys.hw_scale(c.type) END::int AS numeric_scale,
         CASE WHEN sys.hw_type_name(c.type) IN ('date','time','datetime2','datetimeoffset','datetime','smalldatetime')
              THEN (CASE WHEN sys.hw_type_name(c.type) IN ('smalldatetime', 'date') THEN 0
                         ELSE sys.hw_scale(c.type) END) END::int2 AS datetime_precision,
         NULL::varchar(128) AS character_set_catalog, NULL::varchar(128) AS character_set_schema,
         CASE WHEN sys.hw_type_name(c.type) IN ('char','varchar','text') THEN 'iso_1'
              WHEN sys.hw_type_name(c.type) IN ('nchar','nvarchar','ntext') THEN 'UNICODE' END::varchar(128)
           AS character_set_name,
         NULL::varchar(128) AS collation_catalog, NULL::varchar(128) AS collation_schema,
         CASE WHEN sys.hw_type_name(c.type) IN ('char','varchar','text','nchar','nvarchar','ntext')
              THEN 'SQL_Latin1_General_CP1_CI_AS' END::varchar(128) AS collation_name,
         NULL::varchar(128) AS domain_catalog, NULL::varchar(128) AS domain_schema,
         NULL::varchar(128) AS domain_name
  FROM hw_emulator.columns c JOIN hw_emulator.objects o USING (object_id) WHERE o.type IN ('U ', 'V ');
CREATE VIEW hw_information_schema.table_constraints AS
  SELECT current_database()::varchar(128) AS constraint_catalog, o.schema_name::varchar(128) AS constraint_schema,
         i.name::varchar(128) AS constraint_name, current_database()::varchar(128) AS table_catalog,
         o.schema_name::varchar(128) AS table_schema, o.name::varchar(128) AS table_name,
         (CASE WHEN i.is_primary_key THEN 'PRIMARY KEY' ELSE 'UNIQUE' END)::varchar(11) AS constraint_type,
         'NO'::varchar(2) AS is_deferrable, 'NO'::varchar(2) AS initially_deferred
  FROM hw_emulator.indexes i JOIN hw_emulator.objects o USING (object_id)
  WHERE i.is_primary_key OR sys.hw_is_constraint(i.name);
CREATE VIEW hw_information_schema.key_column_usage AS
  SELECT current_database()::varchar(128) AS constraint_catalog, o.schema_name::varchar(128) AS constraint_schema,
         i.name::varchar(128) AS constraint_name, current_database()::varchar(128) AS table_catalog,
         o.schema_name::varchar(128) AS table_schema, o.name::varchar(128) AS table_name,
         c.name::varchar(128) AS column_name, k.ord::int AS ordinal_position
  FROM hw_emulator.indexes i JOIN hw_emulator.objects o USING (object_id)
       CROSS JOIN LATERAL unnest(i.column_ids) WITH ORDINALITY AS k(column_id, ord)
       JOIN hw_emulator.columns c ON c.object_id = i.object_id AND c.column_id = k.column_id
  WHERE i.is_primary_key OR sys.hw_is_constraint(i.name);
CREATE VIEW hw_information_schema.schemata AS
  SELECT current_database()::varchar(128) AS catalog_name, name::varchar(128) AS schema_name,
         'dbo'::varchar(128) AS schema_owner FROM hw_emulator.schemas;
"""

# sys.tables.is_tracked_by_cdc consults cdc.change_tables when the cdc layer created it
TRACKED_FN = r"""
CREATE FUNCTION sys.hw_refuse_cdc_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF sys.hw_is_tracked(TG_ARGV[0]::int) THEN
    PERFORM sys.hw_raise(format('Cannot truncate table ''%s'' because it is published for replication or '
                                'enabled for Change Data Capture.', TG_ARGV[1]), 4711, 16, 1);
  END IF;
  RETURN NULL;
END $$;
CREATE FUNCTION sys.hw_is_tracked(oid_ int) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE r boolean;
BEGIN
  IF to_regclass('cdc.change_tables') IS NULL THEN RETURN false; END IF;
  EXECUTE 'SELECT EXISTS (SELECT 1 FROM cdc.change_tables WHERE source_object_id = $1)' INTO r USING oid_;
  RETURN r;
END $$;
"""


def install_sql() -> str:
    """Everything, in dependency order, for a fresh backing database."""
    return REGISTRY_DDL + TYPES_DDL + TRACKED_FN + CATALOG_DDL
