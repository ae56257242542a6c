"""Running a recorded scenario through Headwater and comparing with Debezium's golden events."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from helpers.capture import (
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


def _paths(a: Any, b: Any, path: str = "") -> list[str]:
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
    """The first differing event, as the field paths that differ."""
    lines = [f"{len(got)} events, golden has {len(want)}"]
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else None
        w = want[i] if i < len(want) else None
        if g != w:
            lines.append(f"first difference at event #{i} ({(g or w)['topic']}):")
            lines += _paths(g, w)[:10] if g and w else [f"got {g is not None}, want {w is not None}"]
            break
    return "\n".join(lines)


def run_scenario(scenario: Path, golden: Path, pg_db: Any, tmp_path: Path,
                 extra: dict[str, str] | None = None) -> tuple[list[dict], list[dict]]:
    """The shared protocol: setup, start, wait for streaming, workload, sentinel, stop; then both
    sides normalized. HW_CONFORMANCE_DUMP=<dir> also writes them there for diffing."""
    name = scenario.name
    pg_db.psql(scenario / "setup.sql")
    slot = f"hw_{name}"[:60]
    props = base_properties(pg_db, tmp_path, slot, **{**read_props(scenario / "props.txt"), **(extra or {})})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, slot, capture)
        wait_snapshot_done(pg_db, capture)
        pg_db.psql(scenario / "workload.sql")
        emit_sentinel_and_wait(pg_db, capture)
    finally:
        capture.stop()
    got = [normalize.normalize_event(r) for r in drop_sentinels(capture.records())]
    want = normalize.load(str(golden / f"{name}.jsonl"))
    if os.environ.get("HW_CONFORMANCE_DUMP"):
        dump = Path(os.environ["HW_CONFORMANCE_DUMP"])
        dump.mkdir(parents=True, exist_ok=True)
        (dump / f"{name}.got.json").write_text(json.dumps(got, indent=1))
        (dump / f"{name}.want.json").write_text(json.dumps(want, indent=1))
    return got, want
