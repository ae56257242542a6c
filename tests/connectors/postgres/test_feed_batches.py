"""How the Spark source's feed sizes its micro-batches while catching up (Trigger.AvailableNow):
a batch waits until the read-ahead is full or everything has arrived (it took only what had
arrived, and a backlog became many batches, each paying the sinks' fixed costs)."""

from __future__ import annotations

from headwater.connectors.postgres.events import DATA_CHANGES
from headwater.connectors.postgres.work import StreamWork
from helpers.feed import available_now_batches, streaming_feed


def _batches(pg_db, tmp_path, limit: int | None) -> list[int]:
    """The change messages of each batch an AvailableNow run makes of 30 transactions of 10 rows."""
    pg_db.execute("CREATE TABLE IF NOT EXISTS public.backlog (id int PRIMARY KEY, n int)")
    with streaming_feed(pg_db, tmp_path) as (feed, start):
        base = pg_db.execute("SELECT coalesce(max(id), 0) FROM public.backlog")[0][0]
        for t in range(30):
            pg_db.execute(f"INSERT INTO public.backlog SELECT g, g FROM generate_series({base + t * 10 + 1}, "
                          f"{base + t * 10 + 10}) g")
        return [sum(1 for item in items if isinstance(item, StreamWork)
                    for payload, _ in item.chunk.messages if payload[0] in DATA_CHANGES)
                for items in available_now_batches(feed, start, limit)]


def test_a_catch_up_is_one_batch_when_it_fits_the_read_ahead(pg_db, tmp_path):
    assert _batches(pg_db, tmp_path, None) == [300]


def test_a_row_limit_still_cuts_a_catch_up_into_several_batches(pg_db, tmp_path):
    sizes = _batches(pg_db, tmp_path, 100)
    # batches end between the chunks the reader handed over, so a limit is "about": the batches
    # are several, and every row is in exactly one
    assert sum(sizes) == 300 and len(sizes) >= 2, sizes
