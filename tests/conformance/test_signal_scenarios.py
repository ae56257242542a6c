"""Signal, incremental/blocking snapshot and notification scenarios (tests/conformance/signals/,
recorded with the real Debezium 3.6.3.Final) through `headwater run`, with the protocol of
test_extra_scenarios.py: setup.sql, `headwater run`, wait for streaming, workload.sql (which
inserts the signals and waits with pg_sleep until each snapshot is over), sentinel, SIGTERM; the
normalized events must equal the golden file as serialized JSON. See signals/README.md for what
normalize.py masks beyond the shared copy and why.
"""

from __future__ import annotations

import pytest

from helpers.conformance import (
    SIGNAL_GOLDEN,
    SIGNAL_SCENARIOS,
    assert_events_equal,
    golden_file,
    run_scenario,
    scenario_params,
)

# Scenario -> why Headwater does not match yet (strict xfail: a fix makes the test fail until removed).
KNOWN: dict[str, str] = {}


def test_every_signal_scenario_has_a_golden_file():
    names = {p.name for p in SIGNAL_SCENARIOS.iterdir() if p.is_dir()}
    assert len(names) == 8, names
    for name in names:
        assert golden_file(SIGNAL_GOLDEN, name).is_file(), name
        assert (SIGNAL_GOLDEN / f"{name}.meta.json").is_file(), name
    stored = {p.name.split(".jsonl")[0] for p in SIGNAL_GOLDEN.glob("*.jsonl*")}
    assert stored == names


def test_large_goldens_are_compressed_and_small_ones_plain():
    """The README's storage rule: over 2 MB gzip-compressed, the rest plain (readable diffs)."""
    for path in SIGNAL_GOLDEN.glob("*.jsonl"):
        assert path.stat().st_size <= 2 * 1024 * 1024, f"{path.name}: store it as .jsonl.gz"


@pytest.mark.parametrize("scenario,golden", scenario_params(shared=False, extra=False, signals=True, known=KNOWN))
def test_signal_scenario_through_headwater_run_matches_debezium(scenario, golden, pg_db, tmp_path):
    got, want = run_scenario(scenario, golden, pg_db, tmp_path, cli=True)
    assert_events_equal(got, want, scenario.name)
