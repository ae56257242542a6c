"""Connector settings that are decided without a database."""

from __future__ import annotations

import pytest

from headwater.config import from_properties
from headwater.connectors.postgres.connector import PostgresConnector

BASE = {"connector.class": "postgresql", "topic.prefix": "p", "database.hostname": "h", "database.user": "u",
        "database.dbname": "d"}


@pytest.mark.parametrize(("extra", "acknowledges"), [
    ({}, True),
    ({"flush.lsn.source": "false"}, False),
    ({"lsn.flush.mode": "manual"}, False),
    ({"lsn.flush.mode": "connector", "flush.lsn.source": "false"}, True),  # lsn.flush.mode wins
])
def test_which_settings_acknowledge_to_the_slot(extra, acknowledges):
    config = from_properties({**BASE, **extra}, sink_type="stdout")
    assert PostgresConnector(config.connector).flush_lsn_enabled() is acknowledges
