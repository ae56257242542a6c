"""The SQL Server Spark source's streaming units without a server: cutting windows at commits, and cutting a
unit at a batch end logged by an earlier run whose windows were other ones (a restarted driver replays the
batch the kill interrupted), across two databases."""

from __future__ import annotations

import collections

from headwater.connectors.sqlserver.source_info import DatabaseOffset, make_offset, offset_sort_key
from headwater.connectors.sqlserver.units import (
    COMPLETE,
    SqlServerUnitStream,
    StreamUnit,
    StreamWindow,
    change_position,
    complete,
    snapshot_position,
)
from headwater.engine.read_ahead import UnitQueue

DBS = ["one", "two"]


def lsn(n: int) -> bytes:
    return n.to_bytes(10, "big")


def window(db: str, low: int, high: int) -> StreamWindow:
    return StreamWindow(db, DBS.index(db), lsn(low), lsn(high), complete(lsn(low - 1)), [], {})


def offset(one: int, two: int) -> dict:
    return make_offset({"one": complete(lsn(one)), "two": complete(lsn(two))})


def stream(items: list[tuple[StreamUnit, dict]]) -> SqlServerUnitStream:
    units = object.__new__(SqlServerUnitStream)
    units.databases = DBS
    units.units = UnitQueue(1000)
    units._pushback = collections.deque()
    units._failure = None
    for unit, after in items:
        units.units.put(unit, after, 1, 1, timeout=0)
    return units


def spans(unit: StreamUnit | None) -> list[tuple[str, int, int]]:
    return [] if unit is None else [(w.database, int.from_bytes(w.from_lsn, "big"), int.from_bytes(w.to_lsn, "big"))
                                    for w in unit.windows]


def test_a_window_is_cut_after_a_commit() -> None:
    head, tail = window("one", 10, 20).cut(lsn(14))
    assert (head.to_lsn, tail.from_lsn) == (lsn(14), lsn(15))
    assert tail.start.commit_lsn == lsn(14) and tail.start.change_lsn == COMPLETE  # changes at 14 are skipped
    assert window("one", 10, 20).cut(lsn(30)) == (window("one", 10, 20), None)
    head, tail = window("one", 10, 20).cut(lsn(5))
    assert head is None and spans(StreamUnit([tail])) == [("one", 10, 20)]


def test_a_unit_is_cut_where_the_earlier_run_ended_its_batch() -> None:
    unit = StreamUnit([window("one", 11, 30)], before=offset(10, 5))
    head, tail = stream([]).split(unit, offset_sort_key(offset(18, 5), DBS))
    assert spans(head) == [("one", 11, 18)] and spans(tail) == [("one", 19, 30)]


def test_a_database_the_earlier_run_took_further_is_taken_there_from_the_units_that_follow() -> None:
    # the earlier run ended its batch at (one: 18, two: 9); this run's first unit already takes database
    # one to 30 while two is at 5: its changes up to 9 come from the next units, the rest stays for later
    unit = StreamUnit([window("one", 11, 30)], before=offset(10, 5))
    later = [(StreamUnit([window("two", 6, 7)], before=offset(30, 5)), offset(30, 7)),
             (StreamUnit([window("one", 31, 40)], before=offset(30, 7)), offset(40, 7)),
             (StreamUnit([window("two", 8, 12)], before=offset(40, 7)), offset(40, 12))]
    units = stream(later)
    head, tail = units.split(unit, offset_sort_key(offset(18, 9), DBS))
    assert spans(head) == [("one", 11, 18), ("two", 6, 7), ("two", 8, 9)]
    assert spans(tail) == [("one", 19, 30)]
    rest = [spans(units.get(0)[0]) for _ in range(2)]
    assert rest == [[("one", 31, 40)], [("two", 10, 12)]]


def test_positions_sort_snapshot_before_streamed_records_of_a_database_and_by_change() -> None:
    snapshot = snapshot_position(1, 3, 2, 7)
    first = change_position(1, lsn(5), lsn(6), 1, 0)
    assert snapshot < first < change_position(1, lsn(5), lsn(6), 1, 1) < change_position(1, lsn(5), lsn(7), 1, 0)
    assert change_position(1, lsn(5), lsn(6), 2, 0) > change_position(1, lsn(5), lsn(6), 1, 5)
    assert len({len(snapshot), len(first), len(change_position(0, None, None, 0, 0))}) == 1
    assert DatabaseOffset().position()[0] == lsn(0)
