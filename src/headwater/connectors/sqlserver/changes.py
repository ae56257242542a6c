"""Reading one capture instance's changes in an LSN range (Debezium's change query and its
SqlServerChangeTablePointer).

The query is Debezium 3.6's, in either `data.query.mode`: `function` reads
`cdc.fn_cdc_get_all_changes_<ci>(from, to, N'all update old')`, `direct` the `cdc.<ci>_CT` table
joined to `cdc.lsn_time_mapping` (3.6.3's text: the captured columns qualified with `[cdc_data].`,
the commit time from `tran_end_time`). Both resume after a (commit LSN, seqval, operation)
position, so a range is read in pages of `streaming.fetch.size` rows, re-running the query after
the last row seen.

SQL Server without MARS runs one statement per connection at a time, so a page is read whole
before the next statement: with `streaming.fetch.size=0` (Debezium: no limit) pages of
`DEFAULT_PAGE_ROWS` keep memory bounded — the same rows in the same order.

:func:`change_rows` needs only picklable inputs besides the connection, so an executor can call it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.connectors.sqlserver.connection import SqlServerConnection, quote
from headwater.connectors.sqlserver.lsn import ZERO
from headwater.relational.table import Column

OP_DELETE = 1
OP_INSERT = 2
OP_UPDATE_BEFORE = 3
OP_UPDATE_AFTER = 4

DEFAULT_PAGE_ROWS = 10_000

_SKIPPED_CODES = {"c": ("2",), "u": ("3", "4"), "d": ("1",)}
_DIRECT = "[cdc_data]."


def skipped_codes(skipped_operations: Sequence[str]) -> list[str]:
    out: list[str] = []
    for op in ("c", "u", "d"):
        if op in skipped_operations:
            out += _SKIPPED_CODES[op]
    return out


def _qualified(expression: str, column: str) -> str:
    """A column's select expression with the column qualified by the change table's alias."""
    name = quote(column)
    return expression.replace(name, _DIRECT + name, 1) if name in expression else expression


def select_list(columns: Sequence[Column], direct: bool) -> str:
    """The captured columns' select expressions (the TYPES helper's, which read exact values)."""
    from headwater.connectors.sqlserver.types import select_expression

    exprs = []
    for c in columns:
        e = select_expression(c)
        exprs.append(_qualified(e, c.name) if direct else e)
    return ", ".join(exprs)


def change_query(database: str, capture_instance: str, columns: Sequence[Column], *, mode: str,
                 skipped: Sequence[str] = (), page_rows: int = 0) -> str:
    """Debezium 3.6's change query for one capture instance (`page_rows` > 0: `SELECT TOP n`)."""
    db = quote(database)
    cols = select_list(columns, mode == "direct")
    if mode == "function":
        query = (f"SELECT [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], {cols}, "
                 f"TODATETIMEOFFSET({db}.sys.fn_cdc_map_lsn_to_time([__$start_lsn]), "
                 "DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) "
                 f"FROM {db}.cdc.{quote('fn_cdc_get_all_changes_' + capture_instance)}(?, ?, N'all update old') ")
        where = ["(([__$start_lsn] = ? AND [__$seqval] = ? AND [__$operation] > ?) "
                 "OR ([__$start_lsn] = ? AND [__$seqval] > ?) OR ([__$start_lsn] > ?))",
                 "[__$start_lsn] <= ?"]
        prefix = ""
        order = "ORDER BY [__$start_lsn] ASC, [__$seqval] ASC, [__$operation] ASC"
    else:
        query = (f"SELECT cdc_data.[__$start_lsn], cdc_data.[__$seqval], cdc_data.[__$operation], "
                 f"cdc_data.[__$update_mask], {cols}, "
                 "TODATETIMEOFFSET(ltm.tran_end_time, DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) "
                 f"FROM {db}.cdc.{quote(capture_instance + '_CT')} AS cdc_data "
                 f"LEFT JOIN {db}.cdc.lsn_time_mapping ltm ON ltm.start_lsn = cdc_data.[__$start_lsn] ")
        where = ["(([cdc_data].[__$start_lsn] = ? AND [cdc_data].[__$seqval] = ? AND [cdc_data].[__$operation] > ?) "
                 "OR ([cdc_data].[__$start_lsn] = ? AND [cdc_data].[__$seqval] > ?) "
                 "OR ([cdc_data].[__$start_lsn] > ?))",
                 "[cdc_data].[__$start_lsn] <= ?"]
        prefix = "[cdc_data]."
        order = ("ORDER BY cdc_data.[__$start_lsn] ASC, cdc_data.[__$command_id] ASC, cdc_data.[__$seqval] ASC, "
                 "cdc_data.[__$operation] ASC")
    codes = skipped_codes(skipped)
    if codes:
        where.append(f"{prefix}[__$operation] NOT IN ({','.join(codes)})")
    query += " WHERE " + " AND ".join(where) + " " + order
    if page_rows > 0:
        query = query.replace("SELECT ", f"SELECT TOP {page_rows} ", 1)
    return query


def query_params(mode: str, from_lsn: bytes, to_lsn: bytes, seqval: bytes, operation: int) -> tuple[Any, ...]:
    head: tuple[Any, ...] = (from_lsn, to_lsn) if mode == "function" else ()
    return (*head, from_lsn, seqval, operation, from_lsn, seqval, from_lsn, to_lsn)


@dataclass(frozen=True)
class ChangeRow:
    """One change-table row: positions, operation, update mask, the captured columns' raw values
    (in the order queried) and the commit time."""

    commit_lsn: bytes
    change_lsn: bytes
    operation: int
    update_mask: bytes | None
    values: tuple[Any, ...]
    commit_time: Any

    def position(self) -> tuple[bytes, bytes]:
        return self.commit_lsn, self.change_lsn


def change_rows(conn: SqlServerConnection, database: str, capture_instance: str, columns: Sequence[Column], *,
                mode: str, from_lsn: bytes, to_lsn: bytes, skipped: Sequence[str] = (), page_rows: int = 0,
                fetch_size: int = 0) -> Iterator[ChangeRow]:
    """Every change of the instance with `from_lsn <= commit LSN <= to_lsn`, in Debezium's order,
    read in pages (see the module's docstring)."""
    page = page_rows if page_rows > 0 else DEFAULT_PAGE_ROWS
    query = change_query(database, capture_instance, columns, mode=mode, skipped=skipped, page_rows=page)
    position: tuple[bytes, bytes, int] | None = None
    what = f"reading the changes of capture instance {capture_instance!r} in database {database!r}"
    while True:
        if position is None:
            params = query_params(mode, from_lsn, to_lsn, ZERO, 0)
        else:
            params = query_params(mode, position[0], to_lsn, position[1], position[2])
        # the page is read whole (the connection runs one statement at a time), `fetch_size` rows
        # per round trip (query.fetch.size)
        rows = list(conn.stream(query, params, fetch_size=fetch_size or page, what=what))
        for row in rows:
            start, seqval, op, mask = row[0], row[1], row[2], row[3]
            yield ChangeRow(bytes(start) if start is not None else None,  # type: ignore[arg-type]
                            bytes(seqval) if seqval is not None else None,  # type: ignore[arg-type]
                            int(op), bytes(mask) if mask is not None else None, tuple(row[4:-1]), row[-1])
        if len(rows) < page:
            return
        last = rows[-1]
        position = (bytes(last[0]), bytes(last[1]), int(last[2]))


def column_changed(update_mask: bytes | None, index: int) -> bool:
    """Debezium's isColumnChanged: bit `index % 8` of byte `index // 8` of the update mask (a
    missing mask or byte: changed)."""
    if update_mask is None:
        return True
    byte = index // 8
    if byte >= len(update_mask):
        return True
    return bool(update_mask[byte] & (1 << (index % 8)))


def is_max_column(column: Column) -> bool:
    """varchar(max), nvarchar(max), varbinary(max) and the LOB types: SQL Server leaves them NULL
    in an update's rows when they did not change."""
    native = column.native
    type_name = getattr(native, "type_name", column.type_name)
    if type_name in ("text", "ntext", "image", "xml"):
        return True
    return type_name in ("varchar", "nvarchar", "varbinary") and getattr(native, "max_length", 0) == -1
