"""Multi-dimensional array values reach a Delta table (snapshot and streaming): an array column
has no typed row form, so its table goes as events, and each value is stored as its event says —
one entry per sub-array of the first dimension (null, or the sub-array's text for string-like
elements, docs/compat.md, Types) in the column's array type; explicit bounds are dropped."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from headwater.embedded.postgres import drop_replication_slot
from headwater.spark.pipeline import Pipeline, load_pipeline
from helpers.capture import spark_properties

SETUP = r"""
CREATE TYPE color AS ENUM ('red', 'green');
CREATE TABLE arrs (id int PRIMARY KEY, i int[], t text[], n numeric(6,2)[], d date[], e color[] NOT NULL);
INSERT INTO arrs VALUES
  (1, '{{1,2},{3,4}}', '{{a,"b c"},{NULL,x}}', '{{1.5,NaN}}', '[0:1][0:0]={{2024-02-29},{NULL}}', '{{red,NULL}}'),
  (2, '[0:2]={7,8,9}', '[5:6]={x,y}', '{1.5,2.25}', '{2024-02-29}', '[0:1]={red,green}'),
  (3, '{}', '{}', '{}', '{}', '{}'),
  (4, NULL, NULL, NULL, NULL, '{{{green}}}');
"""
WORKLOAD = [
    "INSERT INTO arrs SELECT id + 100, i, t, n, d, e FROM arrs",
    "UPDATE arrs SET i = '{{5},{6},{7}}', t = '[0:0][0:0]={{z}}' WHERE id = 103",
]
WANT = {
    1: {"i": [None, None], "t": ['{a,"b c"}', "{NULL,x}"], "n": None, "d": [None, None], "e": ["{red,NULL}"]},
    2: {"i": [7, 8, 9], "t": ["x", "y"], "n": [Decimal("1.50"), Decimal("2.25")], "d": [date(2024, 2, 29)],
        "e": ["red", "green"]},
    3: {"i": [], "t": [], "n": [], "d": [], "e": []},
    4: {"i": None, "t": None, "n": None, "d": None, "e": ["{{green}}"]},
}


def _pipeline(spark, pg_db, tmp_path: Path) -> Pipeline:
    props = spark_properties(pg_db, tmp_path / "run", "hw_md_spark", **{"slot.drop.on.stop": "false"})
    doc = {"source": props, "sinks": [{"type": "delta", "path": "lake"}], "checkpoint": "checkpoint",
           "trigger": {"availableNow": True}, "name": "multidim-arrays"}
    path = tmp_path / "run" / "pipeline.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return Pipeline(load_pipeline(path), spark=spark)


@pytest.mark.timeout(600)
def test_multidimensional_arrays_in_a_delta_table(spark, pg_db, tmp_path):
    pg_db.execute(SETUP)
    try:
        _pipeline(spark, pg_db, tmp_path).start().await_termination(300)  # the snapshot
        for statement in WORKLOAD:
            pg_db.execute(statement)
        _pipeline(spark, pg_db, tmp_path).start().await_termination(300)  # the streamed changes
    finally:
        conn = pg_db.connect()
        try:
            drop_replication_slot(conn, "hw_md_spark")
        finally:
            conn.close()

    df = spark.read.format("delta").load(str(tmp_path / "run" / "lake" / "dbserver1.public.arrs"))
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert {k: types[k] for k in WANT[1]} == {"i": "array<int>", "t": "array<string>", "n": "array<decimal(6,2)>",
                                              "d": "array<date>", "e": "array<string>"}
    got = {r["id"]: {k: r[k] for k in WANT[1]} for r in df.collect()}
    want = {**WANT, **{k + 100: v for k, v in WANT.items()}}
    want[103] = {**WANT[3], "i": [None, None, None], "t": ["{z}"]}
    assert got == want
