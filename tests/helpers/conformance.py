"""Running a recorded scenario through Headwater and comparing with Debezium's golden events."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from helpers.capture import (
    HeadwaterRun,
    RunningCapture,
    base_properties,
    drop_sentinels,
    emit_sentinel_and_wait,
    wait_slot_active,
    wait_snapshot_done,
)

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"

_spec = importlib.util.spec_from_file_location("dbz_normalize", CONFORMANCE / "normalize.py")
normalize: Any = importlib.util.module_from_spec(_spec)  # the shared normalize.py, copied verbatim
_spec.loader.exec_module(normalize)


def read_props(path: Path) -> dict[str, str]:
    props = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
    return props


def serialized(events: list[Any]) -> list[str]:
    """Events as the strict comparison sees them: serialized JSON, so value types (true vs 1,
    1 vs 1.0) and key order count (as ``normalize.py --compare`` does)."""
    return [json.dumps(e, ensure_ascii=False) for e in events]


def _paths(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        if set(a) == set(b) and list(a) != list(b):
            out.append(f"{path}: key order got {list(a)} want {list(b)}")
        for k in list(dict.fromkeys([*a, *b])):
            out += _paths(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += _paths(x, y, f"{path}[{i}]")
        return out
    ja, jb = json.dumps(a, ensure_ascii=False), json.dumps(b, ensure_ascii=False)
    return [] if ja == jb else [f"{path}: got {ja[:300]} want {jb[:300]}"]


def describe_diff(got: list[dict], want: list[dict]) -> str:
    """The first differing event (strictly: as serialized JSON), as the field paths that differ."""
    lines = [f"{len(got)} events, golden has {len(want)}"]
    sg, sw = serialized(got), serialized(want)
    for i in range(max(len(got), len(want))):
        g = sg[i] if i < len(sg) else None
        w = sw[i] if i < len(sw) else None
        if g != w:
            ev = got[i] if g is not None else want[i]
            lines.append(f"first difference at event #{i} ({ev['topic']}):")
            lines += _paths(got[i], want[i])[:10] if g and w else [f"got {g is not None}, want {w is not None}"]
            break
    return "\n".join(lines)


def assert_events_equal(got: list[Any], want: list[Any], label: str = "") -> None:
    """The strict comparison of normalized events (types and key order count)."""
    if serialized(got) != serialized(want):
        raise AssertionError((f"{label}: " if label else "") + describe_diff(got, want))


def run_scenario(scenario: Path, golden: Path, pg_db: Any, tmp_path: Path,
                 extra: dict[str, str] | None = None, *, cli: bool = False) -> tuple[list[dict], list[dict]]:
    """The shared protocol: setup, start, wait for streaming, workload, sentinel, stop; then both
    sides normalized. `cli`: through `headwater run` (a subprocess on a Debezium Server
    application.properties), else the engine in this process. HW_CONFORMANCE_DUMP=<dir> also
    writes both sides there for diffing."""
    name = scenario.name
    pg_db.psql(scenario / "setup.sql")
    slot = f"hw_{name}"[:60]
    props = base_properties(pg_db, tmp_path, slot, **{**read_props(scenario / "props.txt"), **(extra or {})})
    capture = (HeadwaterRun if cli else RunningCapture)(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, slot, capture)
        wait_snapshot_done(pg_db, capture)
        pg_db.psql(scenario / "workload.sql")
        emit_sentinel_and_wait(pg_db, capture)
    finally:
        capture.stop()
    got = [normalize.normalize_event(r) for r in drop_sentinels(capture.records())]
    want = normalize.load(str(golden_file(golden, name)))
    if os.environ.get("HW_CONFORMANCE_DUMP"):
        dump = Path(os.environ["HW_CONFORMANCE_DUMP"])
        dump.mkdir(parents=True, exist_ok=True)
        (dump / f"{name}.got.json").write_text(json.dumps(got, indent=1))
        (dump / f"{name}.want.json").write_text(json.dumps(want, indent=1))
    return got, want


def golden_file(golden: Path, name: str) -> Path:
    """`<name>.jsonl`, or `<name>.jsonl.gz` for a golden file stored compressed (over 2 MB)."""
    plain = golden / f"{name}.jsonl"
    return plain if plain.exists() else golden / f"{name}.jsonl.gz"


SHARED_SCENARIOS = CONFORMANCE / "scenarios"
SHARED_GOLDEN = CONFORMANCE / "golden"
EXTRA_SCENARIOS = CONFORMANCE / "extra" / "scenarios"
EXTRA_GOLDEN = CONFORMANCE / "extra" / "golden"
SIGNAL_SCENARIOS = CONFORMANCE / "signals" / "scenarios"
SIGNAL_GOLDEN = CONFORMANCE / "signals" / "golden"

# Scenarios where Headwater knowingly differs from Debezium (docs/compat.md): an xfail(strict) each,
# with the exact difference, on every path that runs them.
KNOWN_DIFFERENCES: dict[str, str] = {
    "types_float4_digits": (
        "real values are written with PostgreSQL's shortest digits (1.1754944e-38, 1e-45); Debezium's JSON "
        "has Java 17's Float.toString digits (1.17549435e-38, 1.4e-45): same float, another double when "
        "read back (docs/compat.md, Types)"),
}


def scenario_params(*, shared: bool = True, extra: bool = True, signals: bool = False,
                    known: dict[str, str] | None = None) -> list[Any]:
    """pytest params (scenario dir, golden dir) for every recorded scenario, id'd by name; the
    known differences (and `known`, differences of one path) as strict xfails."""
    import pytest

    reasons = {**KNOWN_DIFFERENCES, **(known or {})}
    out = []
    for wanted, scenarios, golden in ((shared, SHARED_SCENARIOS, SHARED_GOLDEN),
                                      (extra, EXTRA_SCENARIOS, EXTRA_GOLDEN),
                                      (signals, SIGNAL_SCENARIOS, SIGNAL_GOLDEN)):
        if not wanted:
            continue
        for sdir in sorted(p for p in scenarios.iterdir() if p.is_dir()):
            reason = reasons.get(sdir.name)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(sdir, golden, marks=marks, id=sdir.name))
    return out
