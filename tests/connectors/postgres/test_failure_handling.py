"""event.processing.failure.handling.mode through the real console script, with an event Debezium
cannot process either (NaN in a NOT NULL numeric(10,2) column, decimal.handling.mode=precise):
fail stops with one line naming table, LSN and column; warn logs it and skips the event; skip
skips it silently. Both places events are built honour it: the reader thread
(encoding.workers=0) and the worker processes (encoding.workers=2). The recorded scenario
failure_warn_nan checks the events against Debezium's."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.cli import HEADWATER, error_line, write_config

SETUP = "CREATE TABLE public.amounts (id integer PRIMARY KEY, amount numeric(10,2) NOT NULL)"


def _ids(out: Path) -> list[int]:
    if not out.exists():
        return []
    return [json.loads(line)["value"]["payload"]["after"]["id"] for line in out.read_text().splitlines()
            if json.loads(line)["topic"] == "dbserver1.public.amounts"]


def _run(db: Any, tmp_path: Path, mode: str, workers: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    db.execute(SETUP)
    config = write_config(tmp_path / "app.properties", db.server, db.name, tmp_path, **{
        "event.processing.failure.handling.mode": mode, "encoding.workers": workers,
        "table.include.list": "public.amounts"})
    log = tmp_path / "run.log"
    proc = subprocess.Popen([str(HEADWATER), "run", str(config)], stdout=subprocess.DEVNULL,
                            stderr=log.open("wb"), stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not db.execute("SELECT bool_or(active) FROM pg_replication_slots")[0][0]:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    db.execute("INSERT INTO public.amounts VALUES (1, 1.5)")
    db.execute("INSERT INTO public.amounts VALUES (2, 'NaN')")
    db.execute("INSERT INTO public.amounts VALUES (3, 3.5)")
    return proc, tmp_path / "out.jsonl", log


@pytest.mark.parametrize("workers", ["0", "2"])
def test_fail_stops_naming_table_lsn_and_column(pg_db, tmp_path: Path, workers: str) -> None:
    proc, out, log = _run(pg_db, tmp_path, "fail", workers)
    try:
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    res = subprocess.CompletedProcess(proc.args, proc.returncode, "", log.read_text())
    assert res.returncode == 1, res.stderr
    message = error_line(res)
    assert "table public.amounts at LSN " in message
    assert re.search(r"at LSN [0-9A-F]+/[0-9A-F]+ \(transaction \d+\), column amount: .*'NaN'", message), message
    assert "event.processing.failure.handling.mode=fail" in message
    assert 2 not in _ids(out)
    assert 3 not in _ids(out)  # nothing after the failed event


@pytest.mark.parametrize(("mode", "workers"), [("warn", "0"), ("warn", "2"), ("skip", "2")])
def test_warn_and_skip_leave_the_event_out(pg_db, tmp_path: Path, mode: str, workers: str) -> None:
    proc, out, log = _run(pg_db, tmp_path, mode, workers)
    try:
        deadline = time.monotonic() + 60
        while 3 not in _ids(out):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    text = log.read_text()
    assert proc.returncode == 0, text
    assert _ids(out) == [1, 3]
    warned = re.findall(r"WARNING .*skipped the change event of table public.amounts at LSN \S+ \(transaction \d+\), "
                        r"column amount \(event.processing.failure.handling.mode=warn\): .*'NaN'", text)
    assert len(warned) == (1 if mode == "warn" else 0), text
    if mode == "skip":
        assert "skipped the change event" not in text
