"""The SQL Server Spark source's streaming units without a server: cutting windows at commits, and cutting a
unit at a batch end logged by an earlier run whose windows were other ones (a restarted driver replays the
batch the kill interrupted), across two databases; what the offsets say of transaction metadata."""

from __future__ import annotations

import collections

from headwater.connectors.sqlserver.lsn import lsn_to_str
from headwater.connectors.sqlserver.source_info import DatabaseOffset, make_offset, offset_sort_key
from headwater.connectors.sqlserver.units import (
    COMPLETE,
    TX_ENDED,
    SqlServerUnitStream,
    StreamUnit,
    StreamWindow,
    _Progress,
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


def test_the_offset_says_up_to_where_transactions_had_their_end() -> None:
    """With transaction metadata: below the commit LSN only (an entry without it, as every checkpoint
    written before it, has every transaction up to its commit LSN ended)."""
    units = stream([])
    units.progress = {"one": _Progress(complete(lsn(20)), complete(lsn(20)), tx_floor=lsn(12)),
                      "two": _Progress(complete(lsn(20)), complete(lsn(20)), tx_floor=lsn(20))}
    entries = units.offset()["databases"]
    assert entries["one"][TX_ENDED] == lsn_to_str(lsn(12)) and TX_ENDED not in entries["two"]
    assert entries["one"]["commit_lsn"] == lsn_to_str(lsn(20))
    assert TX_ENDED not in units.progress["one"].handed.extra  # the executors' start positions stay plain


def test_a_batch_that_ended_with_an_idle_end_gets_it_when_replayed() -> None:
    # the earlier run's batch ended with the idle END of the transaction open at 10 (offset: commit 10
    # complete, event serial number 1); this run started at 10 with that END pending (floor 5) and has
    # a window to 30 already: the END goes into the replayed batch, and the window after it counts it
    # as sent
    units = stream([])
    units._tx = True
    units.progress = {db: _Progress(complete(lsn(10)), complete(lsn(30)), tx_floor=lsn(5)) for db in DBS}
    restart = StreamWindow("one", 0, lsn(10), lsn(30), complete(lsn(10)), [], {}, tx_floor=lsn(5))
    end = make_offset({"one": DatabaseOffset(lsn(10), COMPLETE, 1), "two": complete(lsn(5))})
    head, tail = units.split(StreamUnit([restart], before=offset(10, 5)), offset_sort_key(end, DBS))
    assert head is not None
    assert [(w.from_lsn, w.to_lsn, w.end_open, w.tx_floor) for w in head.windows] == \
        [(lsn(10), lsn(10), False, lsn(5)), (None, lsn(10), True, lsn(5))]
    assert [(w.from_lsn, w.to_lsn, w.tx_floor) for w in tail.windows] == [(lsn(11), lsn(30), lsn(10))]
    assert units.progress["one"].tx_floor == lsn(10) and units.progress["two"].tx_floor == lsn(5)
    # a batch that ended at a commit without an END is replayed without one
    units.progress["one"].tx_floor = lsn(5)
    head, _ = units.split(StreamUnit([restart], before=offset(10, 5)), offset_sort_key(offset(10, 5), DBS))
    assert head is not None and [w.end_open for w in head.windows] == [False]


def test_positions_sort_snapshot_before_streamed_records_of_a_database_and_by_change() -> None:
    snapshot = snapshot_position(1, 3, 2, 7)
    first = change_position(1, lsn(5), lsn(6), 1, 0)
    assert snapshot < first < change_position(1, lsn(5), lsn(6), 1, 1) < change_position(1, lsn(5), lsn(7), 1, 0)
    assert change_position(1, lsn(5), lsn(6), 2, 0) > change_position(1, lsn(5), lsn(6), 1, 5)
    assert len({len(snapshot), len(first), len(change_position(0, None, None, 0, 0))}) == 1
    assert DatabaseOffset().position()[0] == lsn(0)
