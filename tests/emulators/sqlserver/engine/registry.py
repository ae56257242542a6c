"""The hw_emulator registry in a backing database (DDL in bootstrap.py / DESIGN.md): SQL Server
objects and columns with their original spelling and SQL Server types.

Reads are cached per database; any writer in this process calls ``invalidate()``; a lookup that
misses reloads once (the cdc layer writes the registry through SQL without telling us)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import psycopg2.extensions

from ..sqltypes import SqlType


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    column_id: int
    name: str
    pg_name: str
    type: SqlType
    nullable: bool
    identity: bool = False
    default: str | None = None


@dataclass(slots=True)
class IndexInfo:
    index_id: int
    name: str
    is_primary_key: bool
    is_unique: bool
    type_desc: str
    column_ids: list[int]


@dataclass(slots=True)
class ObjectInfo:
    object_id: int
    schema: str
    name: str
    type: str
    pg_schema: str
    pg_name: str
    is_ms_shipped: bool = False
    columns: list[ColumnInfo] = field(default_factory=list)
    indexes: list[IndexInfo] = field(default_factory=list)

    def column(self, name: str) -> ColumnInfo | None:
        low = name.lower()
        for c in self.columns:
            if c.name.lower() == low:
                return c
        return None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


def parse_type(text: str) -> SqlType:
    return SqlType.parse(text)


class Registry:
    """A snapshot of one database's registry plus the (pg oid, attnum) → column map."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str], ObjectInfo] = {}
        self._by_id: dict[int, ObjectInfo] = {}
        self._by_attr: dict[tuple[int, int], tuple[ObjectInfo, ColumnInfo]] = {}
        self._loaded = False
        # misses confirmed by a reload, until the next invalidate(): sys views and other relations
        # outside the registry would otherwise reload it on every result column
        self._missing: set[tuple[Any, ...]] = set()

    def invalidate(self) -> None:
        with self._lock:
            self._loaded = False
            self._missing.clear()

    def _load(self, conn: Any) -> None:
        # Outside a transaction the four SELECTs read one snapshot: each on its own would see what
        # other sessions committed before it (an object without its columns when it was dropped in
        # between). A session's open transaction is left as it is: it must see its own DDL.
        snapshot = conn.autocommit and conn.info.transaction_status == psycopg2.extensions.TRANSACTION_STATUS_IDLE
        with conn.cursor() as cur:
            if snapshot:
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                objects, by_attr = self._read(cur)
            finally:
                if snapshot:
                    cur.execute("ROLLBACK")  # read only: nothing to keep; also after a failed SELECT
        if not conn.autocommit:
            conn.rollback()
        self._objects = {(o.schema.lower(), o.name.lower()): o for o in objects.values()}
        self._by_id = objects
        self._by_attr = by_attr
        self._loaded = True

    @staticmethod
    def _read(cur: Any) -> tuple[dict[int, ObjectInfo], dict[tuple[int, int], tuple[ObjectInfo, ColumnInfo]]]:
        cur.execute("SELECT object_id, schema_name, name, type, pg_schema, pg_name, is_ms_shipped "
                    "FROM hw_emulator.objects")
        objects = {r[0]: ObjectInfo(r[0], r[1], r[2], r[3].strip(), r[4], r[5], r[6]) for r in cur.fetchall()}
        cur.execute("SELECT object_id, column_id, name, pg_name, type, is_nullable, is_identity, "
                    "default_definition FROM hw_emulator.columns ORDER BY object_id, column_id")
        for r in cur.fetchall():
            obj = objects.get(r[0])
            if obj is not None:
                obj.columns.append(ColumnInfo(r[1], r[2], r[3], parse_type(r[4]), r[5], r[6], r[7]))
        cur.execute("SELECT object_id, index_id, name, is_primary_key, is_unique, type_desc, column_ids "
                    "FROM hw_emulator.indexes ORDER BY object_id, index_id")
        for r in cur.fetchall():
            obj = objects.get(r[0])
            if obj is not None:
                obj.indexes.append(IndexInfo(r[1], r[2], r[3], r[4], r[5], list(r[6])))
        cur.execute(
            "SELECT o.object_id, col.column_id, c.oid::int, a.attnum FROM hw_emulator.objects o "
            "JOIN pg_namespace n ON n.nspname = o.pg_schema "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = o.pg_name "
            "JOIN hw_emulator.columns col ON col.object_id = o.object_id "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = col.pg_name")
        by_attr: dict[tuple[int, int], tuple[ObjectInfo, ColumnInfo]] = {}
        for object_id, column_id, rel, attnum in cur.fetchall():
            # inside a session's transaction each SELECT sees the commits made before it: an object
            # another session created after the first one is left for the reload its first miss makes
            obj = objects.get(object_id)
            if obj is None:
                continue
            for col in obj.columns:
                if col.column_id == column_id:
                    by_attr[(rel, attnum)] = (obj, col)
        return objects, by_attr

    def _ensure(self, conn: Any, reload: bool = False) -> None:
        with self._lock:
            if reload or not self._loaded:
                self._load(conn)

    def lookup(self, conn: Any, schema: str, name: str) -> ObjectInfo | None:
        """By SQL Server schema and name, case-insensitively."""
        key = (schema.lower(), name.lower())
        self._ensure(conn)
        obj = self._objects.get(key)
        if obj is None and ("name", *key) not in self._missing:
            self._ensure(conn, reload=True)
            obj = self._objects.get(key)
            if obj is None:
                self._missing.add(("name", *key))
        return obj

    def by_id(self, conn: Any, object_id: int) -> ObjectInfo | None:
        self._ensure(conn)
        obj = self._by_id.get(object_id)
        if obj is None:
            self._ensure(conn, reload=True)
            obj = self._by_id.get(object_id)
        return obj

    def by_attribute(self, conn: Any, table_oid: int, attnum: int) -> tuple[ObjectInfo, ColumnInfo] | None:
        """By PostgreSQL table oid and attribute number (cursor.description's table_oid/table_column)."""
        self._ensure(conn)
        hit = self._by_attr.get((table_oid, attnum))
        if hit is None and ("attr", table_oid, attnum) not in self._missing:
            self._ensure(conn, reload=True)
            hit = self._by_attr.get((table_oid, attnum))
            if hit is None:
                self._missing.add(("attr", table_oid, attnum))
        return hit

    def objects(self, conn: Any) -> list[ObjectInfo]:
        self._ensure(conn)
        return list(self._by_id.values())


def next_object_id(cur: Any) -> int:
    cur.execute("SELECT nextval('hw_emulator.object_ids')")
    return int(cur.fetchone()[0])


def register_object(cur: Any, schema: str, name: str, type_: str, pg_schema: str, pg_name: str,
                    *, is_ms_shipped: bool = False) -> int:
    object_id = next_object_id(cur)
    cur.execute("INSERT INTO hw_emulator.objects (object_id, schema_name, name, type, pg_schema, pg_name, "
                "is_ms_shipped) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (object_id, schema, name, type_, pg_schema, pg_name, is_ms_shipped))
    return object_id


def register_column(cur: Any, object_id: int, column: ColumnInfo) -> None:
    cur.execute("INSERT INTO hw_emulator.columns (object_id, column_id, name, pg_name, type, is_nullable, "
                "is_identity, default_definition) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (object_id, column.column_id, column.name, column.pg_name, str(column.type), column.nullable,
                 column.identity, column.default))


def register_index(cur: Any, object_id: int, index: IndexInfo) -> None:
    cur.execute("INSERT INTO hw_emulator.indexes (object_id, index_id, name, is_primary_key, is_unique, "
                "type_desc, column_ids) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (object_id, index.index_id, index.name, index.is_primary_key, index.is_unique, index.type_desc,
                 index.column_ids))
