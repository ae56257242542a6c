"""Every recorded SQL Server scenario through `headwater run` against the emulator must give exactly the events
Debezium 3.6 gave for it (tests/conformance/sqlserver/<name>/events.jsonl), compared as serialized JSON after
record.py's normalization. The harness is helpers/sqlserver_conformance.py; for one scenario by hand, from
tests/: ``../.venv/bin/python -m helpers.sqlserver_conformance basic_crud``."""

from __future__ import annotations

import pytest

from emulators.sqlserver.record import Scenario
from helpers.sqlserver_conformance import SCENARIOS, load_golden, run_scenario, scenario_names, start_debezium

NAMES = scenario_names()


def _with_signals(name: str) -> bool:
    """A scenario of signals and snapshots on demand: checked by test_scenarios_signals.py (its window
    marks are written by the connector, not by the workload)."""
    return "signal.data.collection" in Scenario.load(SCENARIOS / name).props_text


def test_every_scenario_has_a_golden_file() -> None:
    """A scenario without a golden file would silently not be checked."""
    scenarios = sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())
    assert scenarios == NAMES
    assert len(NAMES) >= 14


@pytest.mark.parametrize("name", [n for n in NAMES if not _with_signals(n)])
def test_scenario_through_headwater_run(name, sqlserver, tmp_path) -> None:
    result = run_scenario(name, sqlserver, tmp_path)
    assert result.equal, result.report()


# properties under which a change row is not one event (filtered tables, skipped operations, key changes)
_NOT_ONE_EVENT_PER_ROW = {"skipped.operations", "message.key.columns", "table.include.list", "table.exclude.list",
                          "schema.include.list", "schema.exclude.list"}


def _one_event_per_change_row(name: str) -> bool:
    """Each table has one capture instance, one database, and every change row is one event (what the
    check below counts on)."""
    scenario = Scenario.load(SCENARIOS / name)
    if any(isinstance(b, str) and "@capture_instance" in b for b in scenario.workload):
        return False
    props = dict(line.split("=", 1) for line in scenario.props_text.splitlines() if "=" in line
                 and not line.lstrip().startswith("#"))
    props = {k.strip(): v.strip() for k, v in props.items()}
    return (not set(props) & _NOT_ONE_EVENT_PER_ROW and "," not in props.get("database.names", "")
            and "signal.data.collection" not in props)


@pytest.mark.parametrize("name", [n for n in NAMES if _one_event_per_change_row(n)])
def test_harness_waits_until_the_workload_is_captured(name, sqlserver, tmp_path) -> None:
    """The harness itself, without a connector: after its capture waits, the change tables hold every change
    of the workload — as many inserts, deletes and update after-images as the golden file has streamed
    c/d/u events (true while each table has one capture instance), and no row comes later."""
    result = run_scenario(name, sqlserver, tmp_path, start=None)
    rows = sum(result.rows_after_workload[db][op] - result.rows_after_setup[db][op]
               for db in result.rows_after_workload for op in (1, 2, 4))
    streamed = [e for e in load_golden(name)
                if isinstance((e.get("value") or {}).get("payload"), dict)
                and e["value"]["payload"].get("op") in ("c", "u", "d")]
    assert rows == len(streamed) > 0, result.report()


@pytest.mark.parametrize("name", ["basic_crud", "include_schema_changes"])
def test_harness_reproduces_the_golden_file_with_debezium(name, sqlserver, tmp_path) -> None:
    """The harness with Debezium's own connector in Headwater's place (record.py's DebeziumRunner): its protocol
    (snapshot wait, ``--@wait`` steps, end detection, normalization) reproduces the golden file, so a
    difference in the test above is Headwater's."""
    result = run_scenario(name, sqlserver, tmp_path, start=start_debezium)
    assert result.equal, result.report()
