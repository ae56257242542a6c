"""Reading table definitions from PostgreSQL's catalog."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from headwater.connectors.postgres.types import PgType
from headwater.relational.table import Column, Table, TableId

log = logging.getLogger(__name__)

# Tables (r) and partitioned tables (p); Debezium snapshots both.
_TABLES_SQL = """
SELECT c.oid, n.nspname, c.relname, c.relkind, c.relreplident, c.relispartition
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%%' AND n.nspname NOT LIKE 'pg\\_temp%%'
ORDER BY n.nspname, c.relname
"""

_COLUMNS_SQL = """
SELECT a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod, a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid) AS default_expr, a.attgenerated <> '' AS generated,
       t.typname, t.typtype, t.typcategory, t.typbasetype, t.typtypmod, t.typelem,
       bt.oid AS base_oid, bt.typname AS base_name, bt.typtype AS base_kind, bt.typcategory AS base_category,
       bt.typelem AS base_elem
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum
"""

_PRIMARY_KEYS_SQL = """
SELECT i.indrelid, a.attname
FROM pg_index i
JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = ANY(%s) AND i.indisprimary
ORDER BY i.indrelid, k.ord
"""

# Without a primary key Debezium keys on the first unique index the JDBC metadata reports
# (ordered by index name), skipping expression indexes.
_UNIQUE_INDEXES_SQL = """
SELECT i.indrelid, ic.relname, a.attname
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = ANY(%s) AND i.indisunique AND NOT i.indisprimary AND i.indexprs IS NULL
ORDER BY i.indrelid, ic.relname, k.ord
"""

# The columns of a pgoutput Relation message (name, type oid, type modifier), in the shape of
# _COLUMNS_SQL rows: their types as the message gives them, not as the catalog has them now.
_RELATION_COLUMNS_SQL = """
SELECT 0, r.ord::int, r.name, r.typid, r.typmod, false, NULL::text, false,
       t.typname, t.typtype, t.typcategory, t.typbasetype, t.typtypmod, t.typelem,
       bt.oid AS base_oid, bt.typname AS base_name, bt.typtype AS base_kind, bt.typcategory AS base_category,
       bt.typelem AS base_elem
FROM unnest(%s::text[], %s::oid[], %s::int4[]) WITH ORDINALITY AS r(name, typid, typmod, ord)
JOIN pg_type t ON t.oid = r.typid
LEFT JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
ORDER BY r.ord
"""

_TYPE_SQL = ("SELECT oid, typname, typtype, typcategory, typelem, typbasetype, typtypmod "
             "FROM pg_type WHERE oid = ANY(%s)")
_ENUM_SQL = "SELECT enumtypid, enumlabel FROM pg_enum WHERE enumtypid = ANY(%s) ORDER BY enumtypid, enumsortorder"


def _running_in(snapshot: str, xid: int) -> bool:
    """Whether the 32-bit transaction id `xid` is in progress in a `txid_current_snapshot()` text
    ("xmin:xmax:xip,…", 64-bit ids with their epoch): listed in xip, or not below xmax (since
    PostgreSQL 14 xmax is the latest completed id + 1, so a running transaction can be above it)."""
    _, xmax_text, xip_text = snapshot.split(":")
    xmax = int(xmax_text)
    full = (xmax & ~0xFFFFFFFF) | xid  # the epoch nearest to xmax
    if full > xmax + 2**31:
        full -= 2**32
    elif full < xmax - 2**31:
        full += 2**32
    return full >= xmax or str(full) in xip_text.split(",")


class CatalogReader:
    """Reads table metadata through an ordinary (non-replication) connection."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def _query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description is not None else []

    def list_tables(self) -> list[tuple[int, TableId, str]]:
        """(oid, table id, relkind) of every user table, ordered by schema and name."""
        return [(oid, TableId(None, schema, name), kind) for oid, schema, name, kind, _, _ in self._query(_TABLES_SQL)]

    def oid_of(self, table_id: TableId) -> int | None:
        rows = self._query(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s", (table_id.schema, table_id.table))
        return rows[0][0] if rows else None

    def read_tables(self, oids: Iterable[int]) -> dict[int, Table]:
        oid_list = list(oids)
        if not oid_list:
            return {}
        rel = {
            oid: (TableId(None, schema, name), kind, ident)
            for oid, schema, name, kind, ident, _ in self._query(
                "SELECT c.oid, n.nspname, c.relname, c.relkind, c.relreplident, c.relispartition "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ANY(%s)", (oid_list,))
        }
        per_table: dict[int, list[Column]] = {oid: [] for oid in oid_list}
        for relid, column in self._columns(self._query(_COLUMNS_SQL, (oid_list,))):
            per_table[relid].append(column)
        keys: dict[int, list[str]] = {}
        for relid, attname in self._query(_PRIMARY_KEYS_SQL, (oid_list,)):
            keys.setdefault(relid, []).append(attname)
        first_unique: dict[int, tuple[str, list[str]]] = {}
        for relid, index_name, attname in self._query(_UNIQUE_INDEXES_SQL, (oid_list,)):
            if relid in keys:
                continue
            current = first_unique.get(relid)
            if current is None:
                first_unique[relid] = (index_name, [attname])
            elif current[0] == index_name:
                current[1].append(attname)
        tables = {}
        for oid in oid_list:
            if oid not in rel:
                continue
            table_id, kind, identity = rel[oid]
            key = keys.get(oid) or (first_unique[oid][1] if oid in first_unique else [])
            tables[oid] = Table(table_id, tuple(per_table[oid]), tuple(key),
                                {"oid": oid, "relkind": kind, "replica_identity": identity})
        return tables

    def read_relation(self, table_id: TableId, columns: Sequence[Any], replica_identity: str | None = None,
                      committed_xid: int | None = None) -> Table:
        """The table a pgoutput Relation message describes, as Debezium builds it: the columns,
        their order and types from the message (the table at WAL time); optionality, defaults and
        the key from the catalog *now*, looked up by name (so a table dropped meanwhile gives
        optional columns and no key, and one re-created under the same name lends its own);
        key columns the message does not have are left out.

        `columns` have `name`, `type_oid` and `type_modifier` (pgoutput.RelationColumn).
        `committed_xid`: the transaction the message came in, whose commit the server has already
        sent. "Now" is after that commit is visible, and one snapshot for every query."""
        if not self.conn.autocommit:  # inside the caller's transaction: its snapshot
            return self._read_relation(table_id, columns, replica_identity)
        if committed_xid is not None:
            self._wait_until_visible(committed_xid)
        self._query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            table = self._read_relation(table_id, columns, replica_identity)
        except BaseException:
            try:
                self._query("ROLLBACK")
            except Exception:  # the connection is gone: the first error is the one to report
                pass
            raise
        self._query("ROLLBACK")
        return table

    def _wait_until_visible(self, xid: int, timeout_s: float = 2.0) -> None:
        """Wait until transaction `xid` (32 bits, as pgoutput sends it) no longer runs for new
        snapshots. The walsender may send a commit as soon as its WAL record is written, a moment
        before the transaction becomes visible: a catalog read in that moment (or two reads
        straddling it) would describe a table the transaction dropped or re-created wrongly."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not _running_in(self._query("SELECT txid_current_snapshot()::text")[0][0], xid):
                return
            if time.monotonic() >= deadline:
                log.warning("transaction %s still runs %.0f s after its commit was received; reading the "
                            "catalog without waiting longer", xid, timeout_s)
                return
            time.sleep(0.005)

    def _read_relation(self, table_id: TableId, columns: Sequence[Any], replica_identity: str | None) -> Table:
        oid = self.oid_of(table_id)
        current = self.read_tables([oid]).get(oid) if oid is not None else None
        described = [c for _, c in self._columns(self._query(_RELATION_COLUMNS_SQL, (
            [c.name for c in columns], [c.type_oid for c in columns], [c.type_modifier for c in columns])))]
        if len(described) != len(columns):
            # a type dropped since (with its column): nothing can decode it; leave the column out
            known = {c.name for c in described}
            log.warning("table %s: the types of columns %s no longer exist; these columns are left out of its "
                        "events", table_id, [c.name for c in columns if c.name not in known])
        now = {c.name: c for c in current.columns} if current is not None else {}
        out = []
        for column in described:
            cat = now.get(column.name)
            if cat is None:
                out.append(column)   # gone from the catalog: optional, no default (as Debezium)
            else:
                out.append(replace(column, optional=cat.optional, default_expression=cat.default_expression))
        names = {c.name for c in columns}
        key = tuple(k for k in current.primary_key if k in names) if current is not None else ()
        attributes = dict(current.attributes) if current is not None else {}
        if replica_identity is not None:
            attributes["replica_identity"] = replica_identity
        return Table(table_id, tuple(out), key, attributes)

    def _domain_bases(self, oids: set[int]) -> dict[int, tuple[Any, ...]]:
        """domain oid -> (oid, name, kind, category, element, modifier) of its innermost base type;
        the modifier is the first one set along the chain of domains (-1 if none)."""
        out: dict[int, tuple[Any, ...]] = {}
        for oid in oids:
            current, modifier = oid, -1
            for _ in range(32):  # PostgreSQL forbids cycles; the bound only guards this loop
                rows = self._query(_TYPE_SQL, ([current],))
                if not rows:
                    break
                r_oid, r_name, r_kind, r_cat, r_elem, r_base, r_mod = rows[0]
                if r_kind != "d":
                    out[oid] = (r_oid, r_name, r_kind, r_cat, r_elem, modifier)
                    break
                modifier = modifier if modifier >= 0 else r_mod
                current = r_base
        return out

    def _columns(self, columns_rows: list[tuple[Any, ...]]) -> list[tuple[int, Column]]:
        """(relation oid, Column) for rows shaped like _COLUMNS_SQL's, resolving domains, arrays and enums."""
        elem_oids = {r[18] for r in columns_rows if r[18]}
        enum_oids = {r[14] for r in columns_rows if r[16] == "e"}
        elem_types = {r[0]: r for r in self._query(_TYPE_SQL, (list(elem_oids),))} if elem_oids else {}
        # array elements may themselves be domains or enums
        for r in list(elem_types.values()):
            if r[2] == "e":
                enum_oids.add(r[0])
        base_of_elem_domains = {r[5] for r in elem_types.values() if r[2] == "d"}
        if base_of_elem_domains:
            elem_types.update({r[0]: r for r in self._query(_TYPE_SQL, (list(base_of_elem_domains),))})
        labels: dict[int, list[str]] = {}
        if enum_oids:
            for typ, label in self._query(_ENUM_SQL, (list(enum_oids),)):
                labels.setdefault(typ, []).append(label)

        def element_type(oid: int) -> PgType:
            r = elem_types[oid]
            if r[2] == "d":
                b = elem_types[r[5]]
                return PgType(b[1], b[0], r[6], b[3], b[2], None, tuple(labels.get(b[0], ())), r[1])
            return PgType(r[1], r[0], -1, r[3], r[2], None, tuple(labels.get(r[0], ())), r[1])

        deep = self._domain_bases({r[14] for r in columns_rows if r[16] == "d"})
        out = []
        for row in columns_rows:
            (relid, attnum, name, typid, typmod, notnull, default_expr, generated, typname, typtype, _typcat,
             _typbase, typtypmod, _typelem, base_oid, base_name, base_kind, base_cat, base_elem) = row
            modifier = typtypmod if typtype == "d" else typmod
            if base_kind == "d":
                # a domain over a domain: the innermost base type, and the first modifier on the way
                base_oid, base_name, base_kind, base_cat, base_elem, inner_mod = deep[base_oid]
                modifier = modifier if modifier >= 0 else inner_mod
            element = element_type(base_elem) if base_cat == "A" and base_elem else None
            pg = PgType(base_name, base_oid, modifier, base_cat, base_kind, element,
                        tuple(labels.get(base_oid, ())), typname)
            length, scale = _length_scale(base_name, modifier)
            out.append((relid, Column(
                name=name, position=attnum, type_name=typname, type_oid=typid, type_modifier=modifier,
                length=length, scale=scale, optional=not notnull, default_expression=default_expr,
                generated=bool(generated), native=pg,
            )))
        return out


def _length_scale(type_name: str, modifier: int) -> tuple[int | None, int | None]:
    if modifier < 0:
        return None, None
    if type_name == "numeric":
        return ((modifier - 4) >> 16) & 0xFFFF, (modifier - 4) & 0xFFFF
    if type_name in ("varchar", "bpchar"):
        return modifier - 4, None
    if type_name in ("bit", "varbit"):
        return modifier, None
    return None, None
