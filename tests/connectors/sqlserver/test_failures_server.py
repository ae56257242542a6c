"""Acceptance (issue 21, Failures): the SQL Server itself killed with SIGKILL while `headwater run`
streams from it, with committed changes the capture job or the connector had not read yet, and
started again on the same data and port (a restarted server): the connector retries per
`errors.max.retries`, the run stays up, and nothing committed is lost."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from test_core_streaming import snapshot_stored
from test_failures_kill import (
    Runner,
    Writer,
    base_props,
    check_delivery,
    create_tables,
    max_version,
    wait_delivered,
)

from helpers.sqlserver import SqlServerEmulator, wait_for

RETRIES = {"errors.max.retries": "30", "errors.retry.delay.initial.ms": "100", "errors.retry.delay.max.ms": "400",
           "retriable.restart.connector.wait.ms": "100",
           # the driver keeps trying a refused connection for the whole login timeout (15 s by default)
           "driver.loginTimeout": "1"}


@contextlib.contextmanager
def restartable_emulator() -> Iterator[SqlServerEmulator]:
    # under /tmp: the backing PostgreSQL runs as the postgres user, which cannot enter pytest's tmp_path
    data_dir = Path(tempfile.mkdtemp(prefix="sqlserver-emulator-data-", dir="/tmp"))
    data_dir.chmod(0o755)
    emulator = SqlServerEmulator(data_dir=data_dir, capture_interval=0.1)
    try:
        yield emulator.start()
    finally:
        emulator.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def retries_logged(runner: Runner) -> int:
    return runner.log.read_text(errors="replace").count("restarting the connector in")


def test_server_killed_while_streaming_is_retried_and_loses_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("HW_CRASH_SEED", random.randrange(1 << 30)))
    context = f"(seed {seed}; HW_CRASH_SEED={seed} reproduces the writer)"
    with restartable_emulator() as server, contextlib.ExitStack() as stack:
        db = "shop"
        server.execute(f"CREATE DATABASE {db}")
        server.execute("EXEC sys.sp_cdc_enable_db", database=db)
        initial = {db: create_tables(server, db, rows=30)}
        writer = Writer(server, {db: {t: dict(r) for t, r in initial[db].items()}}, seed)
        runner = Runner(base_props(server, [db], tmp_path, **RETRIES), tmp_path)
        stack.callback(runner.cleanup)
        runner.start()
        wait_for(lambda: (runner.assert_alive(), snapshot_stored(runner.offsets))[1], "the snapshot", 60)
        port = server.port
        retries = 0
        behind = []
        for crash in range(2):
            writer.batch(40)
            # at once: the last transactions are committed but not captured (capture job every
            # 0.1 s), nor streamed
            behind.append(max_version(runner.output()) < writer.version)
            server.kill()
            wait_for(lambda n=retries: (runner.assert_alive(), retries_logged(runner))[1] > n + 1,
                     f"the connector to retry (crash {crash + 1}) while the server is down", 30)
            server.start()  # the same data directory and port
            assert server.port == port
            retries = retries_logged(runner)
            wait_delivered(runner, writer)
        writer.batch(20)
        wait_delivered(runner, writer)
        runner.assert_alive()
        runner.stop()
        assert any(behind), "each kill came after everything committed was delivered: nothing was at stake"
        log = runner.log.read_text(errors="replace")
        assert "of 30)" in log, "the retries do not count against errors.max.retries=30"
        # one run, restarted by the engine after each loss: it goes on from the stored offset, so
        # a change may come again there (at least once), never anywhere else
        check_delivery(runner.segments(), writer, initial, server, context, replay_anywhere=True)
