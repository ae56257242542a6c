"""The Spark source's own options (no Spark session needed: they are parsed on the driver)."""

from __future__ import annotations

import pytest

from headwater.config import ConfigError
from headwater.connectors.postgres.events import Chunk, StreamPosition
from headwater.connectors.postgres.work import StreamWork
from headwater.spark.source import DEFAULT_STREAM_TASK_MESSAGES, SourceSettings, _runs

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


def _stream_work(messages: int) -> StreamWork:
    return StreamWork(Chunk(StreamPosition(), [(b"I", n) for n in range(messages)]))


def test_streamed_runs_are_grouped_into_tasks_in_order_and_snapshot_chunks_stay_alone():
    """The reader hands over runs of a few dozen messages; a task each cost more than decoding."""
    runs = [_stream_work(40) for _ in range(100)]
    groups = _runs(runs, 1000)
    assert [len(g) for g in groups] == [25, 25, 25, 25]
    assert [item for group in groups for item in group] == runs  # the order holds
    big = _stream_work(5000)  # larger than a task: alone, never split
    assert _runs([runs[0], big, runs[1]], 1000) == [[runs[0]], [big], [runs[1]]]
    wide = [StreamWork(Chunk(StreamPosition(), [(b"I" * 1000, n) for n in range(10)])) for _ in range(6)]
    assert [len(g) for g in _runs(wide, 1000, task_bytes=25_000)] == [2, 2, 2]  # 10 kB each, 25 kB a task
    snapshot = object()  # a work item without a size (a snapshot chunk)
    assert _runs([runs[0], runs[1], snapshot, runs[2]], 1000) == [[runs[0], runs[1]], [snapshot], [runs[2]]]
    assert SourceSettings.from_options({**BASE, "streamtaskmessages": "500"}).stream_task_messages == 500
    assert SourceSettings.from_options(BASE).stream_task_messages == DEFAULT_STREAM_TASK_MESSAGES
    with pytest.raises(ConfigError, match=r"streamTaskMessages='none': expected a positive integer"):
        SourceSettings.from_options({**BASE, "streamTaskMessages": "none"})


def test_headers_can_be_left_out_for_sinks_that_ignore_them():
    assert SourceSettings.from_options(BASE).headers is True
    assert SourceSettings.from_options({**BASE, "HEADERS": "False"}).headers is False
    assert "headers" not in SourceSettings.from_options({**BASE, "headers": "false"}).connector_properties
    with pytest.raises(ConfigError, match=r"headers='none': expected true or false"):
        SourceSettings.from_options({**BASE, "headers": "none"})


def test_stream_delivery_is_events_or_rows():
    assert SourceSettings.from_options(BASE).stream_delivery == "events"
    assert SourceSettings.from_options({**BASE, "streamdelivery": "Rows"}).stream_delivery == "rows"
    with pytest.raises(ConfigError, match=r"streamDelivery='typed': expected one of events, rows"):
        SourceSettings.from_options({**BASE, "streamDelivery": "typed"})


def test_a_chunks_counts_are_its_messages_and_follow_a_join():
    from headwater.connectors.postgres.work import change_messages, chunk_bytes

    chunk = Chunk(StreamPosition(), [(b"B" + b"." * 20, 1), (b"I" + b"." * 99, 2), (b"U" * 50, 3), (b"C" * 25, 4)])
    assert (chunk_bytes(chunk), change_messages(chunk)) == (21 + 100 + 50 + 25, 2)  # BEGIN/COMMIT are no changes
    # a transaction kept whole joins the next chunk's messages into this one (_add_work)
    chunk.messages.extend([(b"D" * 10, 5), (b"T" * 7, 6), (b"M" * 3, 7), (b"R" * 30, 8)])
    assert (chunk_bytes(chunk), change_messages(chunk)) == (196 + 10 + 7 + 3 + 30, 5)
    assert StreamWork(chunk).nbytes == 246 and StreamWork(chunk).size == 8
