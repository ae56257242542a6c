"""Start the SQL Server emulator: ``serve.py --port 0 --password PW``.

Prints ``HOST:PORT`` as the first line of standard output once clients can connect, then serves
until SIGTERM or SIGINT. The backing PostgreSQL is a throwaway cluster, removed on exit — unless
``--data-dir DIR`` is given: the cluster is then kept in DIR and reused by the next start with the
same DIR (databases, change tables and the capture jobs' positions survive a restart).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[2]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from emulators.sqlserver.engine.server import EmulatorServer  # noqa: E402
from emulators.sqlserver.tds.server import TdsServer  # noqa: E402
from emulators.sqlserver.tds.server import trace as statement_trace  # noqa: E402
from headwater.embedded.postgres import ThrowawayPostgres  # noqa: E402

_CLUSTER_POINTER = "cluster"  # file in --data-dir naming the kept cluster's directory


def backing_postgres(data_dir: Path | None) -> ThrowawayPostgres:
    """A new throwaway cluster, or the one kept in ``data_dir`` (created there the first time)."""
    if data_dir is None:
        return ThrowawayPostgres().start()
    data_dir.mkdir(parents=True, exist_ok=True)
    pointer = data_dir / _CLUSTER_POINTER
    if pointer.is_file():
        return ThrowawayPostgres.reopen(pointer.read_text().strip()).start()
    pg = ThrowawayPostgres(base_dir=data_dir, keep=True).start()
    pointer.write_text(str(pg.root_dir))
    return pg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A SQL Server (TDS 7.4, CDC) emulator backed by PostgreSQL")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1433, help="0 picks a free port")
    parser.add_argument("--password", required=True, help="the sa login's password")
    parser.add_argument("--data-dir", type=Path, help="keep the backing PostgreSQL here across restarts")
    parser.add_argument("--capture-interval", type=float, default=0.5,
                        help="seconds between the CDC capture job's log scans (SQL Server's pollinginterval is 5)")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--trace-statements", action="store_true",
                        help="log every batch, RPC (with its parameters) and transaction request a client sends")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.trace_statements:
        statement_trace.setLevel(logging.DEBUG)

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    pg = backing_postgres(args.data_dir)
    try:
        engine = EmulatorServer(pg, args.password, capture_interval=args.capture_interval)
        try:
            server = TdsServer(engine, host=args.host, port=args.port)
            host, port = server.start()
            try:
                print(f"{host}:{port}", flush=True)
                stop.wait()
            finally:
                server.stop()
        finally:
            engine.close()
    finally:
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
