"""Extra conformance scenarios (tests/conformance/extra/, recorded with the real Debezium 3.6.3.Final)
through `headwater run`, as a user runs it: setup.sql, `headwater run` on a Debezium Server
application.properties with the base properties plus the scenario's props.txt, wait until the slot
is active and the snapshot read, run workload.sql, emit a sentinel and wait for it, SIGTERM; then the
events (normalized with the copied normalize.py) must equal the golden file as serialized JSON.
The same scenarios run through the Spark source in tests/spark/test_source_conformance.py.
See extra/README.md for how the golden files were recorded.
"""

from __future__ import annotations

import pytest

from helpers.conformance import EXTRA_GOLDEN, EXTRA_SCENARIOS, assert_events_equal, run_scenario, scenario_params


def test_every_extra_scenario_has_a_golden_file():
    names = {p.name for p in EXTRA_SCENARIOS.iterdir() if p.is_dir()}
    assert names, "no extra scenarios"
    assert names == {p.name[: -len(".jsonl")] for p in EXTRA_GOLDEN.glob("*.jsonl")}
    assert names == {p.name[: -len(".meta.json")] for p in EXTRA_GOLDEN.glob("*.meta.json")}


@pytest.mark.parametrize("scenario,golden", scenario_params(shared=False))
def test_extra_scenario_through_headwater_run_matches_debezium(scenario, golden, pg_db, tmp_path):
    got, want = run_scenario(scenario, golden, pg_db, tmp_path, cli=True)
    assert_events_equal(got, want)
