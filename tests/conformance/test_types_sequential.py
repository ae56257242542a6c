"""The type-mode scenarios again with `encoding.workers=0`: streamed events built on the reader
thread instead of in worker processes, so the modes must reach both (BuilderSettings is pickled to
the workers; the sequential path builds its converters in-process). Golden files: extra/golden."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.conformance import assert_events_equal, run_scenario

EXTRA = Path(__file__).parent / "extra"

# one scenario per option family (decimal, time, binary + unknown types + messages, hstore,
# interval, converter decimal.format)
SCENARIOS = ["types_decimal_string", "types_time_connect", "types_binary_hex", "types_hstore_map",
             "types_interval_string", "decimal_format_numeric"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_type_modes_without_worker_processes(name, pg_db, tmp_path):
    got, want = run_scenario(EXTRA / "scenarios" / name, EXTRA / "golden", pg_db, tmp_path,
                             extra={"encoding.workers": "0"})
    assert_events_equal(got, want)
