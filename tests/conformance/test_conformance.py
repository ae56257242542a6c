"""Every shared conformance scenario must produce Debezium's events (after normalization, compared
as serialized JSON) through `headwater run`, driven by the shared acceptance tool exactly as the
acceptance check drives it. The same scenarios run through the Spark source in
tests/spark/test_source_conformance.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.conformance import SHARED_SCENARIOS

HERE = Path(__file__).parent


def test_scenarios_through_headwater_run(pg_server, tmp_path):
    """The acceptance protocol: the shared runner drives `headwater run` as a subprocess."""
    names = sorted(p.name for p in SHARED_SCENARIOS.iterdir() if p.is_dir())
    assert len(names) >= 12
    headwater = Path(sys.executable).parent / "headwater"
    cmd = [sys.executable, str(HERE / "conformance_run.py"), "--scenarios", str(SHARED_SCENARIOS), "--golden",
           str(HERE / "golden"), "--headwater", str(headwater), "--host", pg_server.host,
           "--port", str(pg_server.port), "--quiet", "1"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert f"conformance: {len(names)}/{len(names)} scenarios equal" in proc.stdout
