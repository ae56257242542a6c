from __future__ import annotations

import pytest

# The minimal configuration example of spec PG-246 (Kafka Connect "config" block).
PG_MINIMAL = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "192.168.99.100",
    "database.port": "5432",
    "database.user": "postgres",
    "database.password": "postgres-secret-pw",
    "database.dbname": "postgres",
    "topic.prefix": "fulfillment",
    "table.include.list": "public.inventory",
}


@pytest.fixture
def pg_props() -> dict[str, str]:
    return dict(PG_MINIMAL)
