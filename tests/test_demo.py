"""`headwater demo`: the sample database, the change generator, and a full run of the demo's
standalone back-end (the Spark back-end's run: tests/spark/test_pipeline_demo.py)."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from headwater.cli.demo import StandaloneBackend, run_demo
from headwater.embedded.sample import (
    CUSTOMERS,
    PRODUCTS,
    SCHEMA,
    TABLES,
    ChangeGenerator,
    create_sample_database,
    sample_connector_properties,
    sample_row_keys,
)


def _payload(part: Any) -> Any:
    """The JSON converter's output with or without schemas."""
    if isinstance(part, dict) and set(part) == {"schema", "payload"}:
        return part["payload"]
    return part


def _read_events(path: Path) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    events = []
    with path.open() as f:
        for line in f:
            doc = json.loads(line)
            events.append((_payload(doc["key"]), _payload(doc["value"])))
    return events


def test_sample_database_and_generator(pg_db) -> None:
    conn = pg_db.connect()
    create_sample_database(conn)
    counts = {t: pg_db.execute(f"SELECT count(*) FROM inventory.{t}")[0][0] for t in TABLES}
    assert counts == {t: len(keys) for t, keys in sample_row_keys().items()}
    assert counts["customers"] == len(CUSTOMERS) and counts["products"] == len(PRODUCTS)

    gen = ChangeGenerator(pg_db.dsn, rate=50, seed=1).start()
    try:
        time.sleep(2.0)
    finally:
        gen.stop()
    assert not gen.running
    assert gen.counts["errors"] == 0, gen.last_error
    assert 40 <= gen.counts["transactions"] <= 110, gen.counts
    assert gen.counts["transactions"] == sum(v for k, v in gen.counts.items() if k not in ("transactions", "errors"))
    # every foreign key still holds and the unique emails did not collide
    orders = pg_db.execute("SELECT count(*) FROM inventory.orders")[0][0]
    customers = pg_db.execute("SELECT count(*) FROM inventory.customers")[0][0]
    assert orders > 0 and customers >= len(CUSTOMERS)


def test_sample_connector_properties_load_as_the_postgres_connector() -> None:
    from headwater import config as cfg
    from headwater.connectors.postgres.config import CONNECTOR_KEY

    class Cluster:
        host, port, user, password = "127.0.0.1", 54321, "postgres", "secret"

    properties = sample_connector_properties(Cluster(), "shop")
    config = cfg.from_properties({**properties, "topic.prefix": "demo"})
    assert config.connector_key == CONNECTOR_KEY
    assert properties["database.port"] == "54321" and properties["database.password"] == "secret"
    assert properties["database.dbname"] == "shop" and properties["schema.include.list"] == SCHEMA
    Cluster.password = None
    assert "database.password" not in sample_connector_properties(Cluster())


def test_demo_refuses_a_duration_or_rate_that_is_not_positive(tmp_path: Path, capsys) -> None:
    assert run_demo(StandaloneBackend(), duration=0, workdir=tmp_path) == 1
    assert run_demo(StandaloneBackend(), rate=-1, workdir=tmp_path) == 1
    err = capsys.readouterr().err
    assert "--duration must be positive" in err and "--rate must be positive" in err
    assert not any(tmp_path.iterdir())  # refused before anything was started or written


def test_demo_run(tmp_path: Path) -> None:
    rc = run_demo(StandaloneBackend(), duration=8, rate=20, workdir=tmp_path)
    assert rc == 0

    topics_dir = tmp_path / "topics"
    expected = sample_row_keys()
    ops: Counter[str] = Counter()
    for table in TABLES:
        path = topics_dir / f"inventory.inventory.{table}.jsonl"
        assert path.is_file(), f"missing {path}"
        events = _read_events(path)
        snapshot_keys = set()
        for key, value in events:
            if value is None:
                continue  # tombstone
            ops[value["op"]] += 1
            assert value["source"]["table"] == table
            if value["op"] == "r":
                assert key is not None
                snapshot_keys.add(next(iter(key.values())))
                assert value["after"] is not None and value["before"] is None
        assert snapshot_keys == expected[table], table
    assert ops["r"] == sum(len(keys) for keys in expected.values())
    for op in ("c", "u", "d"):
        assert ops[op] > 0, f"no {op!r} events: {dict(ops)}"
    assert (tmp_path / "offsets.json").is_file()
