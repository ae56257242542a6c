"""Every shared conformance scenario must produce Debezium's events (after normalization)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.conformance import describe_diff, run_scenario

HERE = Path(__file__).parent
SCENARIOS = HERE / "scenarios"
GOLDEN = HERE / "golden"

FOUNDATION = ["basic_crud", "replica_identity", "pk_change", "no_pk", "tombstones_off", "truncate",
              "truncate_default_skipped", "messages", "tx_metadata", "partitioned_leaf"]
# Full type mapping and unchanged-TOAST placeholders.
TYPES = ["types", "toast"]


@pytest.mark.parametrize("name", FOUNDATION)
def test_scenario_matches_debezium(name, pg_db, tmp_path):
    got, want = run_scenario(SCENARIOS / name, GOLDEN, pg_db, tmp_path)
    assert got == want, describe_diff(got, want)


@pytest.mark.parametrize("name", TYPES)
def test_types_match_debezium(name, pg_db, tmp_path):
    got, want = run_scenario(SCENARIOS / name, GOLDEN, pg_db, tmp_path)
    assert got == want, describe_diff(got, want)


def test_scenarios_through_headwater_run(pg_server, tmp_path):
    """The acceptance protocol: the shared runner drives `headwater run` as a subprocess."""
    headwater = Path(sys.executable).parent / "headwater"
    cmd = [sys.executable, str(HERE / "conformance_run.py"), "--scenarios", str(SCENARIOS), "--golden", str(GOLDEN),
           "--only", ",".join(FOUNDATION + TYPES), "--headwater", str(headwater), "--host", pg_server.host,
           "--port", str(pg_server.port), "--quiet", "1"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    total = len(FOUNDATION) + len(TYPES)
    assert f"conformance: {total}/{total} scenarios equal" in proc.stdout
