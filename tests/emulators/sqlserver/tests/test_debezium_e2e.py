"""Debezium's own SQL Server connector against a fresh emulator, compared with the golden files.

Re-records two representative scenarios with record.py's functions — ``basic_crud`` (snapshot, inserts,
updates, delete + tombstone, transactions) and ``types`` (every type of spec §3 in the default modes,
column defaults in the schemas) — and compares each run with ``tests/conformance/sqlserver/<scenario>/
events.jsonl`` under the strict rule of conformance/normalize.py: every record re-serialized as JSON, so
value types and key order count, after record.py's masking (timestamps, source.version, LSNs, transaction
ids, the runId header).

The golden files were recorded with Debezium 3.6.3 (the oracle virtualenv's jars); CI has Maven's 3.6.1
(scripts/fetch_jars.sh → .jars/debezium-sqlserver), which this test prefers. The two differ in one
statement only (QUERIES.md): 3.6.3's direct-mode change query takes source.ts_ms from
``lsn_time_mapping.tran_end_time`` where 3.6.1 takes ``tran_begin_time`` — a timestamp, masked — and the
version string, masked too; everything else in the events is the same, so no field needs special handling.
Skipped only when no jars are found.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulators.sqlserver import record as rec
from emulators.sqlserver.jvm.classpath import DEBEZIUM_JARS, ClasspathError, find_classpath

GOLDEN = rec.TESTS_DIR / "conformance" / "sqlserver"
SCENARIOS = rec.HERE / "scenarios"
PASSWORD = "E2e-Emulator-Pw1"


def _classpath_or_skip() -> str:
    try:
        cp = find_classpath(DEBEZIUM_JARS, prefer="maven")
    except ClasspathError as e:
        pytest.fail(f"Debezium/mssql-jdbc jars not found (run `bash scripts/setup.sh`): {e}")
    return cp.origin


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rec.Emulator]:
    """One emulator for the module: the scenarios use databases of their own (basic_crud, types)."""
    _classpath_or_skip()
    log = tmp_path_factory.mktemp("emulator") / "emulator.log"
    em = rec.start_emulator(PASSWORD, log)
    try:
        yield em
    finally:
        em.stop()


def _lines(path: Path) -> list[str]:
    """Each record re-serialized (compact, key order kept): the strict comparison form."""
    with open(path, encoding="utf-8") as f:
        return [json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":")) for line in f if line.strip()]


def _describe(line: str) -> str:
    event = json.loads(line)
    value = event.get("value")
    payload = value.get("payload") if isinstance(value, dict) else None
    key = event.get("key")
    key = key.get("payload") if isinstance(key, dict) else key
    op = payload.get("op") if isinstance(payload, dict) else ("tombstone" if value is None else "?")
    return f"{event.get('topic')} op={op} key={json.dumps(key)}"


def _first_difference(expected: list[str], actual: list[str]) -> str:
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if e != a:
            at = next((j for j, (x, y) in enumerate(zip(e, a, strict=False)) if x != y), min(len(e), len(a)))
            return (f"record {i + 1} differs ({_describe(e)}) at character {at}:\n"
                    f"  golden: …{e[max(0, at - 150):at + 150]}…\n  actual: …{a[max(0, at - 150):at + 150]}…")
    return (f"{len(expected)} golden records, {len(actual)} recorded; the extra ones: "
            + "; ".join(_describe(x) for x in (actual[len(expected):] or expected[len(actual):])[:5]))


@pytest.mark.parametrize("scenario", ["basic_crud", "types"])
def test_recording_matches_the_golden_file(scenario: str, emulator: rec.Emulator, tmp_path: Path) -> None:
    golden = GOLDEN / scenario / "events.jsonl"
    assert golden.is_file(), f"no golden file {golden}"
    started = time.monotonic()
    recording = rec.record(rec.Scenario.load(SCENARIOS / scenario), tmp_path / "out", emulator=emulator,
                           password=PASSWORD, workdir=tmp_path, prefer="maven", startup_timeout=120,
                           log=lambda _msg: None)
    elapsed = time.monotonic() - started
    assert recording.result.exit_code == 0
    expected, actual = _lines(golden), _lines(tmp_path / "out" / "events.jsonl")
    assert actual == expected, (f"{scenario} with {recording.classpath.describe()} ({elapsed:.0f} s) differs "
                                f"from {golden}: " + _first_difference(expected, actual))
