"""Heartbeats (`heartbeat.interval.ms=500`) against Debezium 3.6.3.Final's recording in
extra_heartbeat/ (see its README). Heartbeats depend on time, so their number and positions
vary: the data events must equal the golden's, and every heartbeat record must equal Debezium's
in topic, key, schemas and headers, with an integer `ts_ms`; the ~2 s idle period must produce
heartbeats between the changes before and after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.conformance import assert_events_equal, run_scenario, serialized

HERE = Path(__file__).parent / "extra_heartbeat"
TOPIC = "__debezium-heartbeat.dbserver1"


def _split(events: list[dict]) -> tuple[list[dict], list[dict]]:
    return [e for e in events if e["topic"] != TOPIC], [e for e in events if e["topic"] == TOPIC]


def _heartbeats_in_idle_period(events: list[dict]) -> int:
    """Heartbeats between the insert of id 2 and the update of id 1 (around the pg_sleep(2))."""
    ops = [e["value"]["payload"].get("op") if e["topic"] != TOPIC and e["value"] else e["topic"] for e in events]
    start = ops.index("c")
    end = ops.index("u")
    return sum(1 for op in ops[start:end] if op == TOPIC)


def test_golden_file_has_heartbeats():
    raw = [json.loads(line) for line in (HERE / "golden" / "heartbeat.jsonl").read_text().splitlines()]
    _, beats = _split(raw)
    assert len(beats) >= 3 and _heartbeats_in_idle_period(raw) >= 2
    assert all(isinstance(b["value"]["payload"]["ts_ms"], int) for b in beats)


@pytest.mark.parametrize("workers,cli", [("0", False), ("2", True)], ids=["in-process", "headwater-run-workers"])
def test_heartbeats_match_debezium(workers, cli, pg_db, tmp_path):
    scenario = HERE / "scenarios" / "heartbeat"
    got, want = run_scenario(scenario, HERE / "golden", pg_db, tmp_path, extra={"encoding.workers": workers},
                             cli=cli)
    got_data, got_beats = _split(got)
    want_data, want_beats = _split(want)
    assert_events_equal(got_data, want_data)
    # every heartbeat has Debezium's exact topic, key, schemas and (no) headers; ts_ms is masked
    # by normalize.py, and checked in the raw output
    assert set(serialized(got_beats)) == set(serialized(want_beats[:1]))
    raw = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    stamps = [e["value"]["payload"]["ts_ms"] for e in raw if e["topic"] == TOPIC]
    assert stamps and all(isinstance(t, int) for t in stamps) and stamps == sorted(stamps)
    assert len(got_beats) >= 3
    assert _heartbeats_in_idle_period(got) >= 2
