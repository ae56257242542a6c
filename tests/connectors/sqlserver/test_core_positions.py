"""Positions and statements of the SQL Server connector, without a server: Debezium's LSN text,
the per-database offsets and their order, the change queries exactly as Debezium 3.6.3 sends them
(tests/emulators/sqlserver/QUERIES.md §5), the locking statement, the T-SQL key comparison."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from headwater.connectors.sqlserver.changes import change_query, column_changed, query_params
from headwater.connectors.sqlserver.columns import CatalogColumn, column_from_catalog
from headwater.connectors.sqlserver.lsn import ZERO, increment, lsn_from_str, lsn_to_str
from headwater.connectors.sqlserver.snapshot import LOCKING_STATEMENT, _after, quoted_table
from headwater.connectors.sqlserver.source_info import DatabaseOffset, make_offset, offset_sort_key, parse_offset
from headwater.relational.table import TableId

QUERIES = Path(__file__).resolve().parents[2] / "emulators" / "sqlserver" / "QUERIES.md"


def _column(name: str, type_name: str, position: int, max_length: int = 4) -> object:
    return column_from_catalog(CatalogColumn("dbo", "customers", name, position, type_name, max_length, 10, 0, False,
                                             None, False, False, None))


COLUMNS = [_column("id", "int", 1), _column("name", "varchar", 2, 40)]


def test_lsn_text_round_trip_and_order() -> None:
    raw = bytes.fromhex("0000002b00000f280003")
    assert lsn_to_str(raw) == "0000002b:00000f28:0003"
    assert lsn_from_str("0000002b:00000f28:0003") == raw
    assert lsn_from_str("0000002B00000F280003") == raw  # the driver's hex form
    assert lsn_from_str(None) is None and lsn_from_str("NULL") is None and lsn_to_str(None) is None
    assert increment(raw) == bytes.fromhex("0000002b00000f280004") > raw
    with pytest.raises(ValueError):
        lsn_from_str("00:01")


def test_offsets_per_database_keep_debeziums_names_and_sort_per_database() -> None:
    a = DatabaseOffset(commit_lsn=bytes.fromhex("00000001000000010001"), change_lsn=None, event_serial_no=0,
                       snapshot=True, snapshot_completed=True)
    offset = make_offset({"one": a})
    assert offset == {"databases": {"one": {"commit_lsn": "00000001:00000001:0001", "change_lsn": None,
                                            "event_serial_no": 0, "snapshot": True, "snapshot_completed": True}}}
    assert parse_offset(offset, ["one", "two"])["one"] == a
    later = make_offset({"one": DatabaseOffset(bytes.fromhex("00000001000000010002"), ZERO, 1)})
    serial = make_offset({"one": DatabaseOffset(bytes.fromhex("00000001000000010002"), ZERO, 2)})
    assert offset_sort_key(offset, ["one"]) < offset_sort_key(later, ["one"]) < offset_sort_key(serial, ["one"])
    with pytest.raises(ValueError, match="databases"):
        parse_offset({"lsn": 1}, ["one"])
    with pytest.raises(ValueError, match="event_serial_no"):
        parse_offset({"databases": {"one": {"commit_lsn": None, "event_serial_no": -1}}}, ["one"])


def _documented(heading: str) -> str:
    """The statement in the code block after `heading` in QUERIES.md, Debezium's `?` markers kept."""
    text = QUERIES.read_text()
    block = text[text.index(heading):]
    return re.search(r"```\n(.*?)\n```", block, re.S).group(1)  # type: ignore[union-attr]


def test_function_mode_query_is_debeziums() -> None:
    expected = _documented("Change query, `data.query.mode=function`:").replace("[testDB]", "[basic_crud]")
    assert change_query("basic_crud", "dbo_customers", COLUMNS, mode="function") == expected


def test_direct_mode_query_is_debezium_363s() -> None:
    expected = _documented("**Debezium 3.6.3**").replace("[testDB]", "[basic_crud]")
    assert change_query("basic_crud", "dbo_customers", COLUMNS, mode="direct") == expected


def test_paging_and_skipped_operations() -> None:
    query = change_query("db", "dbo_t", COLUMNS, mode="direct", skipped=("u", "d"), page_rows=50)
    assert query.startswith("SELECT TOP 50 cdc_data.[__$start_lsn]")
    assert " AND [cdc_data].[__$operation] NOT IN (3,4,1) ORDER BY " in query
    function = change_query("db", "dbo_t", COLUMNS, mode="function", skipped=("c",))
    assert " AND [__$operation] NOT IN (2) ORDER BY " in function
    lo, hi = bytes(10), bytes.fromhex("00000000000000000009")
    assert query_params("function", lo, hi, ZERO, 0) == (lo, hi, lo, ZERO, 0, lo, ZERO, lo, hi)
    assert query_params("direct", lo, hi, ZERO, 3) == (lo, ZERO, 3, lo, ZERO, lo, hi)


def test_update_mask_bits_as_debezium_reads_them() -> None:
    assert column_changed(None, 5)
    assert column_changed(bytes([0b0000_0100]), 2) and not column_changed(bytes([0b0000_0100]), 1)
    assert column_changed(bytes([0, 1]), 8) and column_changed(bytes([1]), 12)  # beyond the mask: changed


def test_locking_statement_and_key_comparison() -> None:
    table = TableId("testDB", "dbo", "customers")
    assert LOCKING_STATEMENT.format(table=quoted_table(table)) == \
        "SELECT TOP(0) * FROM [testDB].[dbo].[customers] WITH (TABLOCKX)"
    assert _after(COLUMNS) == ("CASE WHEN ([id] > CAST(? AS int) OR ([id] = CAST(? AS int) AND "
                               "[name] > CAST(? AS varchar(40)))) THEN 1 ELSE 0 END")


def test_databases_are_visited_in_debeziums_partition_order() -> None:
    """Debezium's HashSet<SqlServerPartition> (hash: Objects.hash(topic.prefix, database)): the
    order of the recorded scenarios two_databases (db_one before db_two) and
    two_databases_function_txmeta (tx_west before tx_east, although listed second)."""
    from headwater.connectors.sqlserver.source_info import partition_order

    assert partition_order("server1", ["db_one", "db_two"]) == ["db_one", "db_two"]
    assert partition_order("server1", ["tx_east", "tx_west"]) == ["tx_west", "tx_east"]
    assert partition_order("server1", ["tx_west", "tx_east"]) == ["tx_west", "tx_east"]
