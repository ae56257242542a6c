"""Every shared conformance scenario must produce Debezium's events (after normalization)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.capture import (
    RunningCapture,
    base_properties,
    drop_sentinels,
    emit_sentinel_and_wait,
    wait_slot_active,
)

HERE = Path(__file__).parent
SCENARIOS = HERE / "scenarios"
GOLDEN = HERE / "golden"

_spec = importlib.util.spec_from_file_location("dbz_normalize", HERE / "normalize.py")
normalize = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(normalize)

# `types` and `toast` belong to the full type-mapping work (issue 3).
FOUNDATION = ["basic_crud", "replica_identity", "pk_change", "no_pk", "tombstones_off", "truncate",
              "truncate_default_skipped", "messages", "tx_metadata", "partitioned_leaf"]


def read_props(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return props


def _paths(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(dict.fromkeys([*a, *b])):
            out += _paths(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += _paths(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: got {json.dumps(a)[:300]} want {json.dumps(b)[:300]}"]


def describe_diff(got: list[dict], want: list[dict]) -> str:
    lines = [f"{len(got)} events, golden has {len(want)}"]
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else None
        w = want[i] if i < len(want) else None
        if g != w:
            lines.append(f"first difference at event #{i} ({(g or w)['topic']}):")
            lines += _paths(g, w)[:10] if g and w else [f"got {g is not None}, want {w is not None}"]
            break
    return "\n".join(lines)


def run_scenario(name: str, pg_db, tmp_path: Path) -> tuple[list[dict], list[dict]]:
    sdir = SCENARIOS / name
    pg_db.psql(sdir / "setup.sql")
    slot = f"hw_{name}"[:60]
    props = base_properties(pg_db, tmp_path, slot, **read_props(sdir / "props.txt"))
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, slot, capture)
        pg_db.psql(sdir / "workload.sql")
        emit_sentinel_and_wait(pg_db, capture)
    finally:
        capture.stop()
    got = [normalize.normalize_event(r) for r in drop_sentinels(capture.records())]
    want = normalize.load(str(GOLDEN / f"{name}.jsonl"))
    return got, want


@pytest.mark.parametrize("name", FOUNDATION)
def test_scenario_matches_debezium(name, pg_db, tmp_path):
    got, want = run_scenario(name, pg_db, tmp_path)
    assert got == want, describe_diff(got, want)


def test_scenarios_through_headwater_run(pg_server, tmp_path):
    """The acceptance protocol: the shared runner drives `headwater run` as a subprocess."""
    headwater = Path(sys.executable).parent / "headwater"
    cmd = [sys.executable, str(HERE / "conformance_run.py"), "--scenarios", str(SCENARIOS), "--golden", str(GOLDEN),
           "--only", ",".join(FOUNDATION), "--headwater", str(headwater), "--host", pg_server.host,
           "--port", str(pg_server.port), "--quiet", "1"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert f"conformance: {len(FOUNDATION)}/{len(FOUNDATION)} scenarios equal" in proc.stdout
