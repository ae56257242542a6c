"""The signal scenarios (incremental snapshots, their watermark strategies, additional conditions and
surrogate keys, stop-snapshot, a blocking snapshot; notifications on the sink) through `headwater run`
against the emulator must give exactly the events Debezium 3.6.3 gave for them
(tests/conformance/sqlserver/<name>/events.jsonl), compared as serialized JSON after record.py's
normalize_event. Besides the shared masking (timestamps, versions, LSNs), it masks only what is random
or the clock's in each run: the watermark rows' ids (`<uuid>-open`/`-close` -> `<window>-open`/`-close`,
in the signal table's records and the insert_delete tombstones' keys) and their data (the window's
open/close times), and the notifications' `timestamp` and random `id` (a notification answering a signal
keeps the signal's id). By hand, from tests/: ``../.venv/bin/python -m helpers.sqlserver_conformance
incremental_snapshot``."""

from __future__ import annotations

import pytest

from helpers.sqlserver_conformance import run_scenario, scenario_names

SIGNAL_SCENARIOS = ["incremental_snapshot", "incremental_snapshot_conditions", "incremental_snapshot_insert_delete",
                    "blocking_snapshot", "stop_snapshot"]


def test_the_signal_scenarios_have_golden_files() -> None:
    assert set(SIGNAL_SCENARIOS) <= set(scenario_names())


@pytest.mark.parametrize("name", SIGNAL_SCENARIOS)
def test_signal_scenario_through_headwater_run(name: str, sqlserver, tmp_path) -> None:
    result = run_scenario(name, sqlserver, tmp_path)
    assert result.equal, result.report()
