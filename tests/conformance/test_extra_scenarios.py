"""Extra conformance scenarios (tests/conformance/extra/, recorded with the real Debezium 3.6.3.Final).

Same protocol as test_conformance.py: setup.sql, start Headwater in-process with the base properties
plus the scenario's props.txt, wait until the slot is active, run workload.sql, emit a sentinel and
wait for it, then compare the events (normalized with the copied normalize.py) with the golden file.
See extra/README.md for how the golden files were recorded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.conformance import describe_diff, run_scenario

HERE = Path(__file__).parent
EXTRA = HERE / "extra"
SCENARIOS = EXTRA / "scenarios"
GOLDEN = EXTRA / "golden"


# Scenarios where Headwater knowingly differs (an xfail(strict) each, with the exact difference).
KNOWN_DIFFERENCES: dict[str, str] = {
    "types_float4_digits": (
        "real values are written with PostgreSQL's shortest digits (1.1754944e-38, 1e-45); Debezium's JSON "
        "has Java 17's Float.toString digits (1.17549435e-38, 1.4e-45): same float, another double when "
        "read back (docs/compat.md, Types)"),
}

def _params() -> list:
    out = []
    for sdir in sorted(p for p in SCENARIOS.iterdir() if p.is_dir()):
        reason = KNOWN_DIFFERENCES.get(sdir.name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(sdir.name, marks=marks, id=sdir.name))
    return out


def test_every_extra_scenario_has_a_golden_file():
    names = {p.name for p in SCENARIOS.iterdir() if p.is_dir()}
    assert names, "no extra scenarios"
    assert names == {p.name[: -len(".jsonl")] for p in GOLDEN.glob("*.jsonl")}
    assert names == {p.name[: -len(".meta.json")] for p in GOLDEN.glob("*.meta.json")}


@pytest.mark.parametrize("name", _params())
def test_extra_scenario_matches_debezium(name, pg_db, tmp_path):
    got, want = run_scenario(SCENARIOS / name, GOLDEN, pg_db, tmp_path)
    assert got == want, describe_diff(got, want)
