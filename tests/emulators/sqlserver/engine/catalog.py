"""The catalog procedures drivers call for metadata (mssql-jdbc's DatabaseMetaData, ODBC's
SQLColumns…): sp_tables, sp_columns(_100), sp_pkeys, sp_statistics(_100), sp_fkeys, sp_server_info,
sp_datatype_info(_100), sp_sproc_columns(_100), sp_stored_procedures, sp_special_columns.

Result shapes (names, types, order) follow SQL Server's documentation and what mssql-jdbc 12.4
declares for them (SQLServerDatabaseMetaData: the table variable getColumns inserts into)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from ..results import Column, Result, ResultSet, SqlServerError
from ..sqltypes import MAX, SqlType
from .registry import ColumnInfo, ObjectInfo

SYSNAME = SqlType("nvarchar", length=128)
SMALLINT = SqlType("smallint")
INT = SqlType("int")
TINYINT = SqlType("tinyint")

# ODBC 3 SQL data types as sp_columns_100 reports them
ODBC_TYPE = {
    "bit": -7, "tinyint": -6, "smallint": 5, "int": 4, "bigint": -5, "decimal": 3, "numeric": 2, "money": 3,
    "smallmoney": 3, "real": 7, "float": 6, "char": 1, "varchar": 12, "nchar": -8, "nvarchar": -9, "text": -1,
    "ntext": -10, "binary": -2, "varbinary": -3, "image": -4, "uniqueidentifier": -11, "date": 91,
    "time": -154, "datetime2": 93, "datetimeoffset": -155, "datetime": 93, "smalldatetime": 93, "xml": -152,
    "sql_variant": -150, "timestamp": -2,
}
# sp_columns' SS_DATA_TYPE (the old TDS type codes: nullable / not null variants)
SS_DATA_TYPE = {
    "bit": (50, 50), "tinyint": (38, 48), "smallint": (38, 52), "int": (38, 56), "bigint": (38, 127),
    "decimal": (106, 55), "numeric": (108, 63), "money": (110, 60), "smallmoney": (110, 122), "real": (109, 59),
    "float": (109, 62), "char": (47, 47), "varchar": (39, 39), "nchar": (47, 47), "nvarchar": (39, 39),
    "text": (35, 35), "ntext": (35, 35), "binary": (45, 45), "varbinary": (37, 37), "image": (34, 34),
    "uniqueidentifier": (0, 0), "datetime": (111, 61), "smalldatetime": (111, 58), "timestamp": (45, 45),
}


def precision_of(t: SqlType) -> int | None:
    n = t.name
    fixed = {"bit": 1, "tinyint": 3, "smallint": 5, "int": 10, "bigint": 19, "money": 19, "smallmoney": 10,
             "real": 24, "float": 53, "date": 10, "datetime": 23, "smalldatetime": 16, "uniqueidentifier": 36,
             "text": 2147483647, "ntext": 1073741823, "image": 2147483647, "xml": 0, "sql_variant": 8000,
             "timestamp": 8}
    if n in fixed:
        return fixed[n]
    if n in ("decimal", "numeric"):
        return t.precision
    scale = t.scale if t.scale is not None else 7
    if n == "time":
        return 8 + (scale + 1 if scale else 0)
    if n == "datetime2":
        return 19 + (scale + 1 if scale else 0)
    if n == "datetimeoffset":
        return 26 + (scale + 1 if scale else 0)
    if t.length == MAX:
        return 0
    return t.length


def length_of(t: SqlType) -> int | None:
    n = t.name
    fixed = {"bit": 1, "tinyint": 1, "smallint": 2, "int": 4, "bigint": 8, "money": 21, "smallmoney": 12,
             "real": 4, "float": 8, "date": 6, "time": 12, "datetime2": 16, "datetimeoffset": 20, "datetime": 16,
             "smalldatetime": 16, "uniqueidentifier": 16, "text": 2147483647, "ntext": 2147483646,
             "image": 2147483647, "xml": 0, "sql_variant": 8000, "timestamp": 8}
    if n in fixed:
        return fixed[n]
    if n in ("decimal", "numeric"):
        return (t.precision or 18) + 2
    if t.length == MAX:
        return 0
    if n in ("nchar", "nvarchar"):
        return 2 * (t.length or 1)
    return t.length


def scale_of(t: SqlType) -> int | None:
    n = t.name
    if n in ("bit", "tinyint", "smallint", "int", "bigint", "smalldatetime"):
        return 0
    if n in ("money", "smallmoney"):
        return 4
    if n in ("decimal", "numeric"):
        return t.scale
    if n == "datetime":
        return 3
    if n in ("time", "datetime2", "datetimeoffset"):
        return t.scale if t.scale is not None else 7
    return None


def radix_of(t: SqlType) -> int | None:
    # approximate numerics count binary digits (ODBC: NUM_PREC_RADIX 2, precision 24/53), as SQL
    # Server's spt_datatype_info does; the rest decimal digits
    if t.name in ("real", "float"):
        return 2
    if t.name in ("bit", "tinyint", "smallint", "int", "bigint", "decimal", "numeric", "money", "smallmoney"):
        return 10
    return None


def octet_length_of(t: SqlType) -> int | None:
    if t.name in ("char", "varchar", "binary", "varbinary", "nchar", "nvarchar"):
        return 0 if t.length == MAX else length_of(t)
    if t.name in ("text", "image"):
        return 2147483647
    if t.name == "ntext":
        return 2147483646
    if t.name == "xml":
        return 0
    return None


def sql_data_type(t: SqlType) -> tuple[int, int | None]:
    if t.name in ("datetime", "smalldatetime", "datetime2"):
        return 9, 3
    if t.name == "date":
        return 9, 1
    return ODBC_TYPE.get(t.name, -9), None


def type_name_of(c: ColumnInfo) -> str:
    name = {"timestamp": "timestamp"}.get(c.type.name, c.type.name)
    return f"{name} identity" if c.identity else name


# ---------------------------------------------------------------- argument handling

def bind(args: list[tuple[str | None, Any]], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {n: None for n in names}
    pos = 0
    for name, value in args:
        if name:
            key = name.lstrip("@").lower()
            if key not in out:
                raise SqlServerError(8145, f"@{key} is not a parameter for procedure.")
            out[key] = value
        else:
            if pos >= len(names):
                raise SqlServerError(8144, "Procedure or function has too many arguments specified.")
            out[names[pos]] = value
            pos += 1
    for k, v in out.items():
        if type(v).__name__ == "_Default":
            out[k] = None
    return out


def like(pattern: str | None, value: str) -> bool:
    """SQL Server LIKE (case-insensitive collation), with [] classes and \\ escapes as drivers send them."""
    if pattern is None:
        return True
    rx = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            rx.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            rx.append(".*")
        elif ch == "_":
            rx.append(".")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                rx.append(re.escape(ch))
            else:
                body = pattern[i + 1:end]
                rx.append("[" + ("^" + re.escape(body[1:]) if body.startswith("^") else re.escape(body)) + "]")
                i = end
        else:
            rx.append(re.escape(ch))
        i += 1
    return re.fullmatch("".join(rx), value, re.IGNORECASE | re.DOTALL) is not None


def _tables(session: Any, db: str, owner: str | None, name: str | None, qualifier: str | None,
            types: tuple[str, ...] = ("U ",)) -> list[ObjectInfo]:
    if qualifier and qualifier.lower() != db.lower():
        real = session.database_name(qualifier)
        if real is None:
            return []
        db = real
    info = session.server.database(db)
    objs = info.registry.objects(session._conn(db))
    out = [o for o in objs if o.type in [t.strip() for t in types] and like(owner or "%", o.schema)
           and like(name or "%", o.name)]
    return sorted(out, key=lambda o: (o.schema.lower(), o.name.lower()))


def _resolve_db(session: Any, db: str, qualifier: str | None) -> str:
    if qualifier:
        real = session.database_name(qualifier)
        if real is None:
            raise SqlServerError(15250, "The database name component of the object qualifier must be the name of the "
                                        "current database.")
        return real
    return db


def _rs(cols: list[tuple[str, SqlType]], rows: list[tuple[Any, ...]]) -> ResultSet:
    return ResultSet([Column(n, t) for n, t in cols], rows)


# ---------------------------------------------------------------- sp_columns

COLUMNS_100 = [
    ("TABLE_QUALIFIER", SYSNAME), ("TABLE_OWNER", SYSNAME), ("TABLE_NAME", SYSNAME), ("COLUMN_NAME", SYSNAME),
    ("DATA_TYPE", SMALLINT), ("TYPE_NAME", SYSNAME), ("PRECISION", INT), ("LENGTH", INT), ("SCALE", SMALLINT),
    ("RADIX", SMALLINT), ("NULLABLE", SMALLINT), ("REMARKS", SqlType("varchar", length=254)),
    ("COLUMN_DEF", SqlType("nvarchar", length=4000)), ("SQL_DATA_TYPE", SMALLINT), ("SQL_DATETIME_SUB", SMALLINT),
    ("CHAR_OCTET_LENGTH", INT), ("ORDINAL_POSITION", INT), ("IS_NULLABLE", SqlType("varchar", length=254)),
    ("SS_IS_SPARSE", SMALLINT), ("SS_IS_COLUMN_SET", SMALLINT), ("SS_IS_COMPUTED", SMALLINT),
    ("SS_IS_IDENTITY", SMALLINT), ("SS_UDT_CATALOG_NAME", SqlType("nvarchar", length=128)),
    ("SS_UDT_SCHEMA_NAME", SqlType("nvarchar", length=128)),
    ("SS_UDT_ASSEMBLY_TYPE_NAME", SqlType("nvarchar", length=MAX)),
    ("SS_XML_SCHEMACOLLECTION_CATALOG_NAME", SqlType("nvarchar", length=128)),
    ("SS_XML_SCHEMACOLLECTION_SCHEMA_NAME", SqlType("nvarchar", length=128)),
    ("SS_XML_SCHEMACOLLECTION_NAME", SqlType("nvarchar", length=128)), ("SS_DATA_TYPE", TINYINT),
]
COLUMNS_90 = [c for c in COLUMNS_100 if c[0] not in ("SS_IS_SPARSE", "SS_IS_COLUMN_SET", "SS_IS_COMPUTED",
                                                      "SS_IS_IDENTITY", "SS_UDT_CATALOG_NAME", "SS_UDT_SCHEMA_NAME",
                                                      "SS_UDT_ASSEMBLY_TYPE_NAME",
                                                      "SS_XML_SCHEMACOLLECTION_CATALOG_NAME",
                                                      "SS_XML_SCHEMACOLLECTION_SCHEMA_NAME",
                                                      "SS_XML_SCHEMACOLLECTION_NAME")]


def _column_row(db: str, o: ObjectInfo, c: ColumnInfo, full: bool) -> tuple[Any, ...]:
    t = c.type
    sdt, sub = sql_data_type(t)
    ss = SS_DATA_TYPE.get(t.name, (0, 0))[0 if c.nullable else 1]
    row: list[Any] = [db, o.schema, o.name, c.name, ODBC_TYPE.get(t.name, -9), type_name_of(c), precision_of(t),
                      length_of(t), scale_of(t), radix_of(t), 1 if c.nullable else 0, None, c.default, sdt, sub,
                      octet_length_of(t), c.column_id, "YES" if c.nullable else "NO"]
    if full:
        row += [0, 0, 0, 1 if c.identity else 0, None, None, None, None, None, None]
    row.append(ss)
    return tuple(row)


def sp_columns(session: Any, db: str, args: list[tuple[str | None, Any]], full: bool = True) -> Iterator[Result]:
    names = ["table_name", "table_owner", "table_qualifier", "column_name", "odbcver"]
    if full:
        names.append("fusepattern")
    p = bind(args, names)
    if p["table_name"] is None:
        raise SqlServerError(201, "Procedure or function 'sp_columns' expects parameter '@table_name', which was not "
                                  "supplied.")
    db = _resolve_db(session, db, p["table_qualifier"])
    rows = []
    for o in _tables(session, db, p["table_owner"], p["table_name"], None, ("U ", "V ", "S ")):
        for c in o.columns:
            if like(p["column_name"] or "%", c.name):
                rows.append(_column_row(db, o, c, full))
    yield _rs(COLUMNS_100 if full else COLUMNS_90, rows)


# ---------------------------------------------------------------- sp_tables

TABLES = [("TABLE_QUALIFIER", SYSNAME), ("TABLE_OWNER", SYSNAME), ("TABLE_NAME", SYSNAME),
          ("TABLE_TYPE", SqlType("varchar", length=32)), ("REMARKS", SqlType("varchar", length=254))]


def sp_tables(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
    p = bind(args, ["table_name", "table_owner", "table_qualifier", "table_type", "fusepattern"])
    qualifier = p["table_qualifier"]
    if qualifier == "%" and p["table_owner"] in (None, "") and p["table_name"] in (None, ""):
        rows = [(d.name, None, None, None, None) for d in sorted(session.server.databases.values(),
                                                                  key=lambda d: d.name.lower())]
        yield _rs(TABLES, rows)
        return
    db = _resolve_db(session, db, qualifier)
    wanted = {"TABLE": "U ", "VIEW": "V ", "SYSTEM TABLE": "S "}
    types_text = p["table_type"]
    if types_text:
        kinds = [t.strip().strip("'\"").upper() for t in re.split(r",", types_text.replace("''", "'"))]
        kinds = [k for k in kinds if k]
    else:
        kinds = ["TABLE", "VIEW", "SYSTEM TABLE"]
    types = tuple(wanted[k] for k in kinds if k in wanted)
    if "S " in types:
        types = (*types, "U ", "V ")  # ms-shipped tables and views are listed as system tables
    rows = []
    for o in _tables(session, db, p["table_owner"], p["table_name"], None, types):
        if o.is_ms_shipped:
            # sp_tables calls Microsoft-shipped tables (cdc.change_tables, the _CT tables…) SYSTEM TABLE
            if "S " not in types:
                continue
            kind = "SYSTEM TABLE"
        else:
            kind = {"U": "TABLE", "V": "VIEW", "S": "SYSTEM TABLE"}[o.type.strip()]
        rows.append((db, o.schema, o.name, kind, None))
    rows.sort(key=lambda r: (r[3], r[1].lower(), r[2].lower()))
    yield _rs(TABLES, rows)


# ---------------------------------------------------------------- sp_pkeys

PKEYS = [("TABLE_QUALIFIER", SYSNAME), ("TABLE_OWNER", SYSNAME), ("TABLE_NAME", SYSNAME), ("COLUMN_NAME", SYSNAME),
         ("KEY_SEQ", SMALLINT), ("PK_NAME", SYSNAME)]


def sp_pkeys(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
    p = bind(args, ["table_name", "table_owner", "table_qualifier"])
    db = _resolve_db(session, db, p["table_qualifier"])
    rows = []
    info = session.server.database(db)
    for o in info.registry.objects(session._conn(db)):
        # sp_pkeys takes names, not patterns
        if o.name.lower() != (p["table_name"] or "").lower():
            continue
        if p["table_owner"] and o.schema.lower() != p["table_owner"].lower():
            continue
        for ix in o.indexes:
            if ix.is_primary_key:
                by_id = {c.column_id: c for c in o.columns}
                for seq, cid in enumerate(ix.column_ids, start=1):
                    rows.append((db, o.schema, o.name, by_id[cid].name, seq, ix.name))
    rows.sort(key=lambda r: (r[1].lower(), r[2].lower(), r[4]))
    yield _rs(PKEYS, rows)


# ---------------------------------------------------------------- sp_statistics

STATISTICS = [("TABLE_QUALIFIER", SYSNAME), ("TABLE_OWNER", SYSNAME), ("TABLE_NAME", SYSNAME),
              ("NON_UNIQUE", SMALLINT), ("INDEX_QUALIFIER", SYSNAME), ("INDEX_NAME", SYSNAME), ("TYPE", SMALLINT),
              ("SEQ_IN_INDEX", SMALLINT), ("COLUMN_NAME", SYSNAME), ("COLLATION", SqlType("char", length=1)),
              ("CARDINALITY", INT), ("PAGES", INT), ("FILTER_CONDITION", SqlType("varchar", length=128))]


def sp_statistics(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
    p = bind(args, ["table_name", "table_owner", "table_qualifier", "index_name", "is_unique", "accuracy"])
    db = _resolve_db(session, db, p["table_qualifier"])
    only_unique = (p["is_unique"] or "N").upper() == "Y"
    info = session.server.database(db)
    conn = session._conn(db)
    rows: list[tuple[Any, ...]] = []
    for o in info.registry.objects(conn):
        if o.name.lower() != (p["table_name"] or "").lower():
            continue
        if p["table_owner"] and o.schema.lower() != p["table_owner"].lower():
            continue
        with conn.cursor() as cur:
            cur.execute(f'SELECT count(*) FROM "{o.pg_schema}"."{o.pg_name}"')
            cardinality = int(cur.fetchone()[0])
        # the table's own statistics row comes first (TYPE 0, SQL_TABLE_STAT)
        rows.append((db, o.schema, o.name, None, None, None, 0, None, None, None, cardinality, 1, None))
        by_id = {c.column_id: c for c in o.columns}
        for ix in sorted(o.indexes, key=lambda i: (not i.is_unique, i.name)):
            if only_unique and not ix.is_unique:
                continue
            if not like(p["index_name"] or "%", ix.name):
                continue
            kind = 1 if ix.type_desc == "CLUSTERED" else 3
            for seq, cid in enumerate(ix.column_ids, start=1):
                rows.append((db, o.schema, o.name, 0 if ix.is_unique else 1, o.name, ix.name, kind, seq,
                             by_id[cid].name, "A", cardinality, 1, None))
    rows.sort(key=lambda r: (r[3] is not None, r[3] or 0, r[6], r[5] or "", r[7] or 0))
    yield _rs(STATISTICS, rows)


# ---------------------------------------------------------------- sp_fkeys

FKEYS = [("PKTABLE_QUALIFIER", SYSNAME), ("PKTABLE_OWNER", SYSNAME), ("PKTABLE_NAME", SYSNAME),
         ("PKCOLUMN_NAME", SYSNAME), ("FKTABLE_QUALIFIER", SYSNAME), ("FKTABLE_OWNER", SYSNAME),
         ("FKTABLE_NAME", SYSNAME), ("FKCOLUMN_NAME", SYSNAME), ("KEY_SEQ", SMALLINT), ("UPDATE_RULE", SMALLINT),
         ("DELETE_RULE", SMALLINT), ("FK_NAME", SYSNAME), ("PK_NAME", SYSNAME), ("DEFERRABILITY", SMALLINT)]


def sp_fkeys(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
    p = bind(args, ["pktable_name", "pktable_owner", "pktable_qualifier", "fktable_name", "fktable_owner",
                    "fktable_qualifier"])
    db = _resolve_db(session, db, p["pktable_qualifier"] or p["fktable_qualifier"])
    info = session.server.database(db)
    conn = session._conn(db)
    objs = {(o.pg_schema, o.pg_name): o for o in info.registry.objects(conn)}
    rules = {"a": 1, "r": 1, "c": 0, "n": 2, "d": 4}
    rows = []
    with conn.cursor() as cur:
        cur.execute("""
            SELECT c.conname, fn.nspname, f.relname, pn.nspname, pr.relname, k.ord, fa.attname, pa.attname,
                   c.confupdtype, c.confdeltype,
                   (SELECT ic.relname FROM pg_class ic WHERE ic.oid = c.conindid)
            FROM pg_constraint c
            JOIN pg_class f ON f.oid = c.conrelid JOIN pg_namespace fn ON fn.oid = f.relnamespace
            JOIN pg_class pr ON pr.oid = c.confrelid JOIN pg_namespace pn ON pn.oid = pr.relnamespace
            CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(fk, pk, ord)
            JOIN pg_attribute fa ON fa.attrelid = c.conrelid AND fa.attnum = k.fk
            JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attnum = k.pk
            WHERE c.contype = 'f' ORDER BY 1, k.ord""")
        for conname, fns, frel, pns, prel, ord_, fcol, pcol, upd, dele, pkname in cur.fetchall():
            fo, po = objs.get((fns, frel)), objs.get((pns, prel))
            if fo is None or po is None:
                continue
            if p["pktable_name"] and po.name.lower() != p["pktable_name"].lower():
                continue
            if p["fktable_name"] and fo.name.lower() != p["fktable_name"].lower():
                continue
            fc = next((c.name for c in fo.columns if c.pg_name == fcol), fcol)
            pc = next((c.name for c in po.columns if c.pg_name == pcol), pcol)
            rows.append((db, po.schema, po.name, pc, db, fo.schema, fo.name, fc, int(ord_), rules.get(upd, 1),
                         rules.get(dele, 1), conname, pkname, 7))
    yield _rs(FKEYS, rows)


# ---------------------------------------------------------------- sp_server_info, sp_datatype_info

def sp_server_info(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
    p = bind(args, ["attribute_id"])
    from .server import PRODUCT_VERSION
    attrs = [(1, "DBMS_NAME", "Microsoft SQL Server"),
             (2, "DBMS_VER", f"Microsoft SQL Server 2022 - {PRODUCT_VERSION}"),
             (10, "OWNER_TERM", "owner"), (11, "TABLE_TERM", "table"), (12, "MAX_OWNER_NAME_LENGTH", "128"),
             (13, "TABLE_LENGTH", "128"), (14, "MAX_QUAL_LENGTH", "128"), (15, "COLUMN_LENGTH", "128"),
             (16, "IDENTIFIER_CASE", "MIXED"), (17, "TX_ISOLATION", "2"), (18, "COLLATION_SEQ",
                                                                           "charset=iso_1 sort_order=nocase_iso "
                                                                           "charset_num=1 sort_order_num=52"),
             (19, "SAVEPOINT_SUPPORT", "Y"), (20, "MULTI_RESULT_SETS", "Y"), (22, "ACCESSIBLE_TABLES", "Y"),
             (100, "USERID_LENGTH", "128"), (101, "QUALIFIER_TERM", "database"), (102, "NAMED_TRANSACTIONS", "Y"),
             (103, "SPROC_AS_LANGUAGE", "Y"), (104, "ACCESSIBLE_SPROC", "Y"), (105, "MAX_INDEX_COLS", "16"),
             (106, "RENAME_TABLE", "Y"), (107, "RENAME_COLUMN", "Y"), (108, "DROP_COLUMN", "Y"),
             (109, "INCREASE_COLUMN_LENGTH", "Y"), (110, "DDL_IN_TRANSACTION", "Y"), (111, "DESCENDING_INDEXES", "Y"),
             (112, "SP_RENAME", "Y"), (113, "REMOTE_SPROC", "Y"), (500, "SYS_SPROC_VERSION", "16.00.4115")]
    if p["attribute_id"] is not None:
        attrs = [a for a in attrs if a[0] == int(p["attribute_id"])]
    yield _rs([("ATTRIBUTE_ID", INT), ("ATTRIBUTE_NAME", SqlType("varchar", length=60)),
               ("ATTRIBUTE_VALUE", SqlType("varchar", length=255))], attrs)


DATATYPE_INFO = [("TYPE_NAME", SYSNAME), ("DATA_TYPE", SMALLINT), ("PRECISION", INT),
                 ("LITERAL_PREFIX", SqlType("varchar", length=32)), ("LITERAL_SUFFIX", SqlType("varchar", length=32)),
                 ("CREATE_PARAMS", SqlType("varchar", length=32)), ("NULLABLE", SMALLINT),
                 ("CASE_SENSITIVE", SMALLINT), ("SEARCHABLE", SMALLINT), ("UNSIGNED_ATTRIBUTE", SMALLINT),
                 ("MONEY", SMALLINT), ("AUTO_INCREMENT", SMALLINT), ("LOCAL_TYPE_NAME", SYSNAME),
                 ("MINIMUM_SCALE", SMALLINT), ("MAXIMUM_SCALE", SMALLINT), ("SQL_DATA_TYPE", SMALLINT),
                 ("SQL_DATETIME_SUB", SMALLINT), ("NUM_PREC_RADIX", INT), ("INTERVAL_PRECISION", SMALLINT),
                 ("USERTYPE", SMALLINT)]


def sp_datatype_info(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
    p = bind(args, ["data_type", "odbcver"])
    specs = ["bit", "tinyint", "smallint", "int", "bigint", "decimal(38,0)", "numeric(38,0)", "money", "smallmoney",
             "real", "float", "char(8000)", "varchar(8000)", "nchar(4000)", "nvarchar(4000)", "text", "ntext",
             "binary(8000)", "varbinary(8000)", "image", "uniqueidentifier", "date", "time(7)", "datetime2(7)",
             "datetimeoffset(7)", "datetime", "smalldatetime", "xml", "sql_variant", "timestamp"]
    rows = []
    for spec in specs:
        t = SqlType.parse(spec)
        n = t.name
        quoted = n in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "date", "time", "datetime2",
                       "datetimeoffset", "datetime", "smalldatetime", "uniqueidentifier", "xml")
        prefix = "N'" if n in ("nchar", "nvarchar", "ntext", "xml") else "'" if quoted else (
            "0x" if n in ("binary", "varbinary", "image", "timestamp") else None)
        params = {"decimal": "precision,scale", "numeric": "precision,scale", "char": "length", "varchar": "max length",
                  "nchar": "length", "nvarchar": "max length", "binary": "length", "varbinary": "max length",
                  "time": "scale", "datetime2": "scale", "datetimeoffset": "scale"}.get(n)
        sdt, sub = sql_data_type(t)
        row = (n, ODBC_TYPE[n], precision_of(t) if n not in ("char", "varchar", "nchar", "nvarchar", "binary",
                                                              "varbinary") else t.length,
               prefix, "'" if quoted else None, params, 0 if n == "timestamp" else 1,
               1 if quoted and n not in ("date", "time", "datetime2", "datetimeoffset", "datetime", "smalldatetime",
                                         "uniqueidentifier") else 0, 3, 0 if n in ("tinyint",) else (
                   1 if n in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "binary", "varbinary", "image",
                              "uniqueidentifier", "date", "time", "datetime2", "datetimeoffset", "datetime",
                              "smalldatetime", "xml", "sql_variant", "timestamp") else 0),
               1 if n in ("money", "smallmoney") else 0, 0 if n in ("int", "bigint", "smallint", "tinyint",
                                                                    "decimal", "numeric") else None,
               n, 0 if scale_of(t) is not None else None,
               (38 if n in ("decimal", "numeric") else scale_of(t)), sdt, sub, radix_of(t), None, None)
        rows.append(row)
    if p["data_type"] is not None:
        rows = [r for r in rows if r[1] == int(p["data_type"])]
    yield _rs(DATATYPE_INFO, rows)


def _empty(cols: list[tuple[str, SqlType]]) -> Callable[[Any, str, list[tuple[str | None, Any]]], Iterator[Result]]:
    def proc(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
        yield _rs(cols, [])
    return proc


SPROC_COLUMNS = [("PROCEDURE_QUALIFIER", SYSNAME), ("PROCEDURE_OWNER", SYSNAME), ("PROCEDURE_NAME", SYSNAME),
                 ("COLUMN_NAME", SYSNAME), ("COLUMN_TYPE", SMALLINT), ("DATA_TYPE", SMALLINT), ("TYPE_NAME", SYSNAME),
                 ("PRECISION", INT), ("LENGTH", INT), ("SCALE", SMALLINT), ("RADIX", SMALLINT), ("NULLABLE", SMALLINT),
                 ("REMARKS", SqlType("varchar", length=254)), ("COLUMN_DEF", SqlType("nvarchar", length=4000)),
                 ("SQL_DATA_TYPE", SMALLINT), ("SQL_DATETIME_SUB", SMALLINT), ("CHAR_OCTET_LENGTH", INT),
                 ("ORDINAL_POSITION", INT), ("IS_NULLABLE", SqlType("varchar", length=254)),
                 ("SS_DATA_TYPE", TINYINT)]
STORED_PROCEDURES = [("PROCEDURE_QUALIFIER", SYSNAME), ("PROCEDURE_OWNER", SYSNAME),
                     ("PROCEDURE_NAME", SqlType("nvarchar", length=134)), ("NUM_INPUT_PARAMS", INT),
                     ("NUM_OUTPUT_PARAMS", INT), ("NUM_RESULT_SETS", INT), ("REMARKS", SqlType("varchar", length=254)),
                     ("PROCEDURE_TYPE", SMALLINT)]
SPECIAL_COLUMNS = [("SCOPE", SMALLINT), ("COLUMN_NAME", SYSNAME), ("DATA_TYPE", SMALLINT), ("TYPE_NAME", SYSNAME),
                   ("PRECISION", INT), ("LENGTH", INT), ("SCALE", SMALLINT), ("PSEUDO_COLUMN", SMALLINT)]


def sp_special_columns(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
    p = bind(args, ["table_name", "table_owner", "table_qualifier", "col_type", "scope", "nullable", "odbcver"])
    db = _resolve_db(session, db, p["table_qualifier"])
    rows = []
    if (p["col_type"] or "R").upper() == "R":
        for o in _tables(session, db, p["table_owner"], p["table_name"], None):
            if o.name.lower() != (p["table_name"] or "").lower():
                continue
            pk = next((ix for ix in o.indexes if ix.is_primary_key), None) or next(
                (ix for ix in o.indexes if ix.is_unique), None)
            if pk is None:
                continue
            by_id = {c.column_id: c for c in o.columns}
            for cid in pk.column_ids:
                c = by_id[cid]
                rows.append((1, c.name, ODBC_TYPE.get(c.type.name, -9), type_name_of(c), precision_of(c.type),
                             length_of(c.type), scale_of(c.type), 1))
    yield _rs(SPECIAL_COLUMNS, rows)


def sp_rename(session: Any, db: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
    """sp_rename 'schema.table', 'new' (the object keeps its id) and sp_rename 'schema.table.col', 'new', 'COLUMN'."""
    from ..results import Message
    p = bind(args, ["objname", "newname", "objtype"])
    objname, newname = p["objname"], p["newname"]
    if not objname or not newname:
        raise SqlServerError(15248, "Either the parameter @objname is ambiguous or the claimed @objtype () is wrong.",
                             severity=11)
    parts = [x.strip().strip("[]") for x in str(objname).split(".")]
    kind = (p["objtype"] or "").upper()
    if kind == "COLUMN":
        schema, table, column = (parts if len(parts) == 3 else ["dbo", *parts])[-3:]
    else:
        schema, table = (parts if len(parts) == 2 else ["dbo", parts[-1]])[-2:]
        column = None
    obj = session.lookup(db, schema, table)
    if obj is None or (column is not None and obj.column(column) is None):
        raise SqlServerError(15248, f"Either the parameter @objname is ambiguous or the claimed @objtype "
                                    f"({kind.lower()}) is wrong.", severity=11)
    conn = session._conn(db)
    in_tx = session.trancount > 0
    with conn.cursor() as cur:
        cur.execute("SAVEPOINT hw_stmt" if in_tx else "BEGIN")
        try:
            rel = f'"{obj.pg_schema}"."{obj.pg_name}"'
            if column is not None:
                c = obj.column(column)
                cur.execute(f'ALTER TABLE {rel} RENAME COLUMN "{c.pg_name}" TO "{newname.lower()}"')
                cur.execute("UPDATE hw_emulator.columns SET name = %s, pg_name = %s WHERE object_id = %s AND "
                            "column_id = %s", (newname, newname.lower(), obj.object_id, c.column_id))
            else:
                if session.lookup(db, obj.schema, newname) is not None:
                    raise SqlServerError(15335, f"Error: The new name '{newname}' is already in use as a object "
                                                "name and would cause a duplicate that is not permitted.", severity=11)
                cur.execute(f'ALTER TABLE {rel} RENAME TO "{newname.lower()}"')
                cur.execute("UPDATE hw_emulator.objects SET name = %s, pg_name = %s, modify_date = localtimestamp "
                            "WHERE object_id = %s", (newname, newname.lower(), obj.object_id))
            cur.execute("RELEASE SAVEPOINT hw_stmt" if in_tx else "COMMIT")
        except Exception:
            cur.execute("ROLLBACK TO SAVEPOINT hw_stmt" if in_tx else "ROLLBACK")
            raise
    session.server.database(db).registry.invalidate()
    yield Message(15477, "Caution: Changing any part of an object name could break scripts and stored procedures.",
                  severity=10, state=1)


PROCEDURES: dict[str, Callable[[Any, str, list[tuple[str | None, Any]]], Iterator[Result]]] = {
    "sp_rename": sp_rename,
    "sp_columns_100": sp_columns,
    "sp_columns_170": sp_columns,
    "sp_columns": lambda s, d, a: sp_columns(s, d, a, full=False),
    "sp_columns_90": lambda s, d, a: sp_columns(s, d, a, full=False),
    "sp_tables": sp_tables,
    "sp_pkeys": sp_pkeys,
    "sp_statistics": sp_statistics,
    "sp_statistics_100": sp_statistics,
    "sp_fkeys": sp_fkeys,
    "sp_server_info": sp_server_info,
    "sp_datatype_info": sp_datatype_info,
    "sp_datatype_info_100": sp_datatype_info,
    "sp_datatype_info_90": sp_datatype_info,
    "sp_sproc_columns": _empty(SPROC_COLUMNS),
    "sp_sproc_columns_100": _empty(SPROC_COLUMNS),
    "sp_stored_procedures": _empty(STORED_PROCEDURES),
    "sp_special_columns": sp_special_columns,
    "sp_special_columns_100": sp_special_columns,
}
