"""The snapshot plan for a connector whose run has several partitions (SQL Server's databases):
partitions in the connector's order, tables ordered within each by `table.include.list` matched
on `order_name`, markers per partition, select overrides by collection or order name; and the
standalone coordinator marking each partition's last record `last`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from headwater.engine.capture import _snapshot
from headwater.engine.snapshot_plan import plan_chunks, snapshot_marker, snapshot_tables
from headwater.engine.snapshot_policy import Decision
from headwater.engine.source import SnapshotPoint
from headwater.relational.table import Column, Table, TableId


@dataclass
class Captured:
    table: Table
    partition: str

    @property
    def collection(self) -> str:
        return f"{self.table.id.catalog}.{self.table.id.schema}.{self.table.id.table}"

    @property
    def order_name(self) -> str:
        return f"{self.table.id.schema}.{self.table.id.table}"

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return ("id",)


class Config:
    def __init__(self, **values: Any) -> None:
        self.values = values
        self.raw = {k.replace("_", "."): v for k, v in values.items()}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


class Rows:
    """A dialect counting the rows each table has."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def count(self, table: Any, select: str | None) -> int:
        return self.counts[table.collection]

    def sampled_bounds(self, *args: Any) -> list[Any]:
        return []

    def exact_bounds(self, *args: Any) -> list[Any]:
        return []

    def block_range(self, table: Any) -> None:
        return None


def _captured(db: str, name: str) -> Captured:
    table = Table(TableId(db, "dbo", name), (Column("id", 1, "int", optional=False),), ("id",))
    return Captured(table, db)


TABLES = [_captured("sales", "orders"), _captured("sales", "customers"), _captured("stock", "items"),
          _captured("stock", "archive")]


def test_partitions_keep_their_order_and_tables_follow_the_include_list_within_each() -> None:
    config = Config(**{"table.include.list": ["dbo\\.orders", "dbo\\..*"]})
    kept, _ = snapshot_tables(config, TABLES, None, None)
    assert [t.collection for t in kept] == ["sales.dbo.orders", "sales.dbo.customers", "stock.dbo.archive",
                                            "stock.dbo.items"]


def test_markers_are_per_partition_and_skip_empty_last_tables() -> None:
    counts = {"sales.dbo.orders": 3, "sales.dbo.customers": 0, "stock.dbo.items": 0, "stock.dbo.archive": 0}
    kept, selects = snapshot_tables(Config(), TABLES, None, None)
    chunks = plan_chunks(Rows(counts), kept, selects, 10)
    flags = [(c.collection, c.partition, c.first_table, c.last_table) for c in chunks]
    assert flags == [
        ("sales.dbo.customers", "sales", True, False),
        ("sales.dbo.orders", "sales", False, True),     # the partition's last table with rows
        ("stock.dbo.archive", "stock", True, False),
        ("stock.dbo.items", "stock", False, True),      # no table with rows: the partition's last
    ]


def test_select_overrides_by_collection_or_order_name() -> None:
    config = Config(**{"snapshot.select.statement.overrides": ["sales.dbo.orders", "dbo.items"]})
    config.raw = {"snapshot.select.statement.overrides.sales.dbo.orders": "SELECT * FROM a",
                  "snapshot.select.statement.overrides.dbo.items": "SELECT * FROM b"}
    _, selects = snapshot_tables(config, TABLES, None, None)
    assert selects == {"sales.dbo.orders": "SELECT * FROM a", "stock.dbo.items": "SELECT * FROM b"}


class _Record:
    def __init__(self, collection: str, n: int) -> None:
        self.value = {"source": {"snapshot": "true", "table": collection, "n": n}}


class _Source:
    """Reads two rows per table, marking them from the chunk's flags as a connector does."""

    def snapshot_tables(self, point: SnapshotPoint) -> list[Captured]:
        return TABLES

    def chunk_dialect(self, point: SnapshotPoint) -> Rows:
        return Rows({})

    def read_chunk(self, point: SnapshotPoint, chunk: Any, emit: Any, stop: threading.Event) -> None:
        for n in range(2):
            record = _Record(chunk.collection, n)
            record.value["source"]["snapshot"] = snapshot_marker(n == 0, n == 1, chunk.first_table, chunk.last_table)
            emit(record)

    def open_snapshot(self, offset: Any, resnapshot: bool) -> SnapshotPoint:
        return SnapshotPoint(None, {})

    def close_snapshot(self, point: Any = None) -> None:
        pass

    def completed_offset(self, offset: Any) -> dict[str, Any]:
        return {"done": True}


class _Connector:
    config = Config()
    snapshot_query = None
    column_filter = None


def test_standalone_snapshot_marks_each_partitions_last_record() -> None:
    out: list[Any] = []
    _snapshot(_Connector(), _Source(), None, Decision(True, True), out.extend, threading.Event())  # type: ignore[arg-type]
    markers = [(r.value["source"]["table"], r.value["source"]["snapshot"]) for r in out if hasattr(r, "value")]
    assert markers == [
        ("sales.dbo.customers", "first"), ("sales.dbo.customers", "last_in_data_collection"),
        ("sales.dbo.orders", "first_in_data_collection"), ("sales.dbo.orders", "last"),
        ("stock.dbo.archive", "first"), ("stock.dbo.archive", "last_in_data_collection"),
        ("stock.dbo.items", "first_in_data_collection"), ("stock.dbo.items", "last"),
    ]
