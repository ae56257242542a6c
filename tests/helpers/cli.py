"""The `headwater` console script run as a user runs it: a Debezium Server properties file for a
test database, the command, and its one-line error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEADWATER = Path(sys.prefix) / "bin" / "headwater"
if not HEADWATER.exists():  # pragma: no cover - the tests are run from the project's virtualenv
    HEADWATER = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "headwater"

ERROR_PREFIX = "headwater: error: "


def write_config(path: Path, server, dbname: str, workdir: Path, **source: str) -> Path:
    """A Debezium Server application.properties for `server`/`dbname`; `source` adds or replaces
    `debezium.source.*` properties (a value of None removes one)."""
    props: dict[str, str | None] = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": server.host,
        "database.port": str(server.port),
        "database.user": server.user,
        "database.dbname": dbname,
        "topic.prefix": "dbserver1",
        "slot.name": f"hw_cli_{workdir.name[-12:].lower().replace('-', '_')}",
        "slot.drop.on.stop": "true",
        "offset.storage.file.filename": str(workdir / "offsets.json"),
        "offset.flush.interval.ms": "100",
    }
    if server.password is not None:
        props["database.password"] = server.password
    props.update(source)
    lines = [f"debezium.source.{k}={v}" for k, v in props.items() if v is not None]
    lines += ["debezium.sink.type=jsonl", f"debezium.sink.jsonl.path={workdir / 'out.jsonl'}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def headwater(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HEADWATER), *map(str, args)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def error_line(res: subprocess.CompletedProcess[str]) -> str:
    """The `headwater: error:` message, asserted to be exactly one line and the last thing printed."""
    lines = res.stderr.rstrip("\n").splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1, f"expected one '{ERROR_PREFIX}' line, stderr was:\n{res.stderr}"
    assert errors[0] == len(lines) - 1, (
        f"the error message is not one line (it continues on {len(lines) - 1 - errors[0]} more line(s)); "
        f"stderr was:\n{res.stderr}")
    return lines[errors[0]][len(ERROR_PREFIX):]
