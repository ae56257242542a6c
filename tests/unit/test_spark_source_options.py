"""The Spark source's own options (no Spark session needed: they are parsed on the driver)."""

from __future__ import annotations

import pytest

from headwater.config import ConfigError
from headwater.connectors.postgres.feed import DEFAULT_READ_AHEAD_MESSAGES, _ChunkCollector
from headwater.spark.source import SourceSettings

BASE = {"database.hostname": "localhost", "topic.prefix": "p"}


def test_source_options_are_parsed_case_insensitively_and_kept_out_of_the_connector_properties():
    s = SourceSettings.from_options({**BASE, "readaheadmessages": "4096", "maxrowsperbatch": "1000",
                                     "snapshotdelivery": "ROWS"})
    assert (s.read_ahead_messages, s.max_rows_per_batch, s.snapshot_delivery) == (4096, 1000, "rows")
    assert not {"readaheadmessages", "readAheadMessages", "maxRowsPerBatch"} & set(s.connector_properties)
    assert SourceSettings.from_options(BASE).read_ahead_messages is None  # the feed's default


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_a_bad_read_ahead_is_a_configuration_error_naming_the_option(value):
    with pytest.raises(ConfigError, match=rf"readAheadMessages='{value}': expected a positive integer"):
        SourceSettings.from_options({**BASE, "readAheadMessages": value})


def test_the_read_ahead_queue_holds_whole_chunks_of_messages():
    assert _ChunkCollector(1).chunks.maxsize == 1
    assert _ChunkCollector(2048).chunks.maxsize == 1
    assert _ChunkCollector(2049).chunks.maxsize == 2
    assert _ChunkCollector(DEFAULT_READ_AHEAD_MESSAGES).chunks.maxsize == DEFAULT_READ_AHEAD_MESSAGES // 2048
