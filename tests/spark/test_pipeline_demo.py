"""`headwater demo` (the Spark pipeline on the embedded default): runs end to end, and every lake
table equals its source table when it stops."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from headwater.cli.pipeline_demo import run_pipeline_demo


@pytest.mark.timeout(900)
def test_pipeline_demo_run(spark, tmp_path: Path, capsys, caplog) -> None:
    rc = run_pipeline_demo(duration=8, rate=10, workdir=tmp_path, spark=spark)
    out = capsys.readouterr()
    # a catch-up that ran into its bound (once in CI: the test took 382 s, not reproduced since):
    # reported with what the query looked like, for the next one to see why
    for record in caplog.records:
        if "did not look idle" in record.getMessage():
            warnings.warn(record.getMessage(), stacklevel=1)
    assert rc == 0, out.err
    assert "lake = source" in out.out
    assert " NO" not in out.out, out.out       # every table: the lake equals PostgreSQL
    assert "yes" in out.out
    topics = tmp_path / "topics"
    assert (topics / "inventory.inventory.customers").is_dir()
    assert any((tmp_path / "lake").glob("inventory.inventory.orders*"))
