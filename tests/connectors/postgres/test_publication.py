"""The `publish` option Debezium 3.6 gives the publications it creates."""

from __future__ import annotations

import pytest

from headwater.connectors.postgres.replication import publish_operations


@pytest.mark.parametrize(("skipped", "publish"), [
    (None, None),                       # skipped.operations not set: PostgreSQL's default (all four)
    (["none"], None),
    (["t"], "insert, update, delete"),  # set explicitly to its default value: truncates not published
    (["c", "u"], "delete, truncate"),
    (["c", "u", "d"], "truncate"),
])
def test_publish_option_lists_the_operations_not_skipped(skipped, publish):
    assert publish_operations(skipped) == publish
