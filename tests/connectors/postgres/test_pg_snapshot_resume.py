"""Acceptance: `headwater run` killed (SIGKILL) in the middle of an initial snapshot read in
chunks resumes it at the next chunk (a new REPEATABLE READ transaction, the same slot), streams
from the slot's original position, and the events of both runs replayed in order end in the
table's state — with rows updated, deleted and inserted while it was down."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from test_crash_restart import Runner, item_events, wait_until

from headwater.engine.snapshot_resume import progress_of

ROWS = 60_000
CHUNK = 2_000


def _stored(runner: Runner) -> dict[str, Any] | None:
    try:
        offsets = json.loads(runner.offsets.read_text(encoding="utf-8"))["offsets"]
    except (OSError, ValueError, KeyError):
        return None
    return next(iter(offsets.values()), None)


def _replay(events: list[tuple[str, int, str, Any]]) -> dict[int, str]:
    state: dict[int, str] = {}
    for op, key, val, _ in events:
        if op == "d":
            state.pop(key, None)
        else:
            state[key] = val
    return state


def test_sigkill_mid_snapshot_resumes_at_the_next_chunk(pg_db: Any, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text NOT NULL)")
    pg_db.execute(f"INSERT INTO public.items SELECT g, 'i' || g FROM generate_series(1, {ROWS}) g")
    runner = Runner(pg_db, tmp_path, f"hw_snapresume_{uuid.uuid4().hex[:12]}",
                    **{"max.batch.size": "128", "max.queue.size": "512", "snapshot.chunk.rows": str(CHUNK)})

    def progressed() -> bool:
        stored = _stored(runner)
        progress = progress_of(stored) if stored else None
        return progress is not None and progress.after is not None and int(progress.after[0]) >= 5 * CHUNK

    try:
        runner.start()
        wait_until(lambda: (runner.assert_alive() or True) and progressed(), 120, "several chunks to complete")
        runner.kill()
        stored = _stored(runner)
        assert stored is not None and stored.get("snapshot") and not stored.get("snapshot_completed"), stored
        progress = progress_of(stored)
        assert progress is not None and progress.table == "public.items" and progress.after is not None
        completed = int(progress.after[0])
        first = item_events(runner.segments()[0])
        assert completed < ROWS and len(first) < ROWS, "the kill came after the snapshot's end"

        # while down: rows of completed chunks and of chunks not read yet change
        pg_db.execute("UPDATE public.items SET val = 'down' WHERE id IN (1, %s, %s)", (completed, ROWS - 1))
        pg_db.execute("DELETE FROM public.items WHERE id IN (2, %s)", (ROWS - 2,))
        pg_db.execute(f"INSERT INTO public.items VALUES ({ROWS + 1}, 'between')")
        runner.start()
        runner.wait_streaming(timeout=240)
        pg_db.execute(f"INSERT INTO public.items VALUES ({ROWS + 2}, 'streamed')")
        pg_db.execute("UPDATE public.items SET val = 'changed' WHERE id = 3")
        runner.wait_for_sentinel()
        rc = runner.terminate()
        assert rc == 0, f"exit code {rc} after SIGTERM\n{runner.logs()}"
    finally:
        runner.cleanup()

    assert "resuming the interrupted snapshot" in (tmp_path / "run2.log").read_text(errors="replace"), runner.logs()
    second = item_events(runner.segments()[1])
    reads = Counter(k for op, k, _, _ in first + second if op == "r")
    again = sorted(k for k, n in reads.items() if n > 1)
    assert not [k for k in again if k <= completed], f"rows of completed chunks read again: {again[:10]}"
    # read twice: only what the first run delivered after its last stored offset (at least once)
    assert set(again) == {k for op, k, _, _ in first if op == "r" and k > completed} - {ROWS - 2}
    second_reads = {k for op, k, _, _ in second if op == "r"}
    assert min(second_reads) > completed, "the resumed run read rows of completed chunks"
    # nothing missing: every row present at the first point or inserted since was read or streamed
    assert set(reads) | {k for op, k, _, _ in second if op == "c"} >= set(range(1, ROWS + 3)) - {ROWS - 2}
    assert ("r", ROWS + 1, "between") in {e[:3] for e in second}, "a row inserted while down was not read"
    assert ROWS - 2 not in second_reads
    # the stream starts at the slot's original position: the changes made while down come again
    streamed = [e[:2] if e[0] == "d" else e[:3] for e in second if e[0] != "r"]
    assert streamed[-2:] == [("c", ROWS + 2, "streamed"), ("u", 3, "changed")]
    assert ("d", 2) in streamed and ("u", 1, "down") in streamed and ("u", completed, "down") in streamed
    table = dict(pg_db.execute("SELECT id, val FROM public.items"))
    assert _replay(first + second) == table
    markers = [r["value"]["source"]["snapshot"] for seg in runner.segments() for r in seg
               if r["topic"] == "dbserver1.public.items" and r["value"] is not None and r["value"]["op"] == "r"]
    assert markers[0] == "first" and markers[-1] == "last"
    assert markers.count("first") == 1 and markers.count("last") == 1
