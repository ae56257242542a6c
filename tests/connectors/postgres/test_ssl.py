"""SSL connections (database.sslmode / sslrootcert / sslcert / sslkey / sslpassword) against a real
SSL-enabled throwaway server, with certificates made by `openssl` for the test: encryption is in
use on both the normal and the replication connection, a server certificate signed by another CA
is refused with one clear line, and client-certificate authentication (pg_hba `cert`) works with
an encrypted key — whose password never appears in any output."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from headwater import config as cfg
from headwater.connectors.postgres.connection import connect
from helpers.capture import RunningCapture, base_properties, drop_sentinels, emit_sentinel_and_wait, wait_slot_active
from helpers.cli import error_line, headwater, write_config

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

KEY_PASSWORD = "k3y-pa55word-xyz"
DB_PASSWORD = "db-pa55word-xyz"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt",
             "-days", "2", "-subj", f"/CN={name}", cwd=d)


def _signed(d: Path, name: str, cn: str, ca: str, *, ext: str | None = None, key_password: str | None = None) -> None:
    if key_password is None:
        _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", f"{name}.key", cwd=d)
    else:
        _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-aes256",
                 "-pass", f"pass:{key_password}", "-out", f"{name}.key", cwd=d)
    passin = ["-passin", f"pass:{key_password}"] if key_password else []
    _openssl("req", "-new", "-key", f"{name}.key", *passin, "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
    extra: list[str] = []
    if ext:
        (d / f"{name}.ext").write_text(ext)
        extra = ["-extfile", f"{name}.ext"]
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-out", f"{name}.crt", "-days", "2", *extra, cwd=d)
    (d / f"{name}.key").chmod(0o600)  # libpq refuses a private key others can read


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CA, server certificate for 127.0.0.1, client certificate for role `certuser` (encrypted
    key), and an unrelated CA."""
    d = tmp_path_factory.mktemp("certs")
    _ca(d, "ca")
    _ca(d, "otherca")
    _signed(d, "server", "127.0.0.1", "ca", ext="subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _signed(d, "client", "certuser", "ca", key_password=KEY_PASSWORD)
    return d


@pytest.fixture(scope="module")
def ssl_server(certs: Path):
    from helpers.postgres import PostgresForTests

    server = PostgresForTests(
        ssl={"cert": certs / "server.crt", "key": certs / "server.key", "ca": certs / "ca.crt"},
        hba=["hostssl all          certuser 127.0.0.1/32 cert",
             "hostssl replication  certuser 127.0.0.1/32 cert"],
    ).start()
    try:
        server.psql("CREATE ROLE certuser LOGIN SUPERUSER REPLICATION")
        yield server
    finally:
        server.stop()


class _Db:
    """The minimum of conftest's PgDatabase that the capture helpers use."""

    def __init__(self, server: Any, name: str) -> None:
        self.server, self.name = server, name

    def execute(self, sql: str, params: Any = None) -> Any:
        conn = self.server.connect(self.name)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else None
        finally:
            conn.close()


@pytest.fixture
def ssl_db(ssl_server, request: pytest.FixtureRequest):
    name = f"ssl_{request.node.name[5:30].lower()}"
    ssl_server.create_database(name)
    db = _Db(ssl_server, name)
    db.execute("CREATE TABLE public.items (id int PRIMARY KEY, label text)")
    db.execute("INSERT INTO public.items VALUES (1, 'one'), (2, 'two')")
    yield db
    ssl_server.drop_database(name)


def _config(db: _Db, **extra: str) -> cfg.Configuration:
    props = base_properties(db, Path("/nonexistent"), "unused", **extra)
    return cfg.from_properties(props).connector


def _uses_ssl(conn: Any) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        return bool(cur.fetchone()[0])


@pytest.mark.parametrize("mode", ["require", "verify-ca", "verify-full"])
def test_sslmodes_encrypt_the_connection(ssl_db: _Db, certs: Path, mode: str) -> None:
    extra = {"database.sslmode": mode}
    if mode.startswith("verify"):
        extra["database.sslrootcert"] = str(certs / "ca.crt")
    conn = connect(_config(ssl_db, **extra))
    try:
        assert _uses_ssl(conn)
    finally:
        conn.close()
    conn = connect(_config(ssl_db, **{"database.sslmode": "disable"}))
    try:
        assert not _uses_ssl(conn)
    finally:
        conn.close()


def test_stream_over_verified_ssl_with_client_certificate(ssl_db: _Db, certs: Path, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Client-certificate authentication with an encrypted key: snapshot and streaming work, both
    connections are encrypted, and the key's password is never logged."""
    caplog.set_level(logging.DEBUG)
    slot = "hw_ssl_cert"
    props = base_properties(ssl_db, tmp_path, slot, **{
        "database.user": "certuser",
        "database.sslmode": "verify-full",
        "database.sslrootcert": str(certs / "ca.crt"),
        "database.sslcert": str(certs / "client.crt"),
        "database.sslkey": str(certs / "client.key"),
        "database.sslpassword": KEY_PASSWORD,
        "table.include.list": "public.items",
    })
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(ssl_db, slot, capture)
        rows = ssl_db.execute(
            "SELECT a.application_name, s.ssl, a.usename FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) "
            "WHERE a.application_name LIKE 'headwater%' ORDER BY 1")
        assert ("headwater-stream", True, "certuser") in rows, rows
        assert ("headwater", True, "certuser") in rows, rows
        ssl_db.execute("INSERT INTO public.items VALUES (3, 'three')")
        emit_sentinel_and_wait(ssl_db, capture)
    finally:
        capture.stop()
    records = drop_sentinels(capture.records())
    ids = [(r["value"]["payload"]["op"], r["value"]["payload"]["after"]["id"]) for r in records]
    assert ids == [("r", 1), ("r", 2), ("c", 3)]
    assert KEY_PASSWORD not in caplog.text
    assert KEY_PASSWORD not in repr(capture.config)


def test_verify_full_with_the_wrong_root_certificate_fails_in_one_line(ssl_db: _Db, certs: Path,
                                                                       tmp_path: Path) -> None:
    config = write_config(tmp_path / "app.properties", ssl_db.server, ssl_db.name, tmp_path, **{
        "database.sslmode": "verify-full",
        "database.sslrootcert": str(certs / "otherca.crt"),
        "database.password": DB_PASSWORD,
        "database.sslpassword": KEY_PASSWORD,
    })
    res = headwater("run", config)
    assert res.returncode == 1, res.stderr
    message = error_line(res)
    assert "certificate verify failed" in message
    assert f"{ssl_db.server.host}:{ssl_db.server.port}" in message
    for secret in (DB_PASSWORD, KEY_PASSWORD):
        assert secret not in res.stderr + res.stdout


def test_wrong_key_password_is_reported_without_it(ssl_db: _Db, certs: Path) -> None:
    from headwater.engine.connector import ConnectorError

    with pytest.raises(ConnectorError) as info:
        connect(_config(ssl_db, **{
            "database.user": "certuser",
            "database.sslmode": "verify-full",
            "database.sslrootcert": str(certs / "ca.crt"),
            "database.sslcert": str(certs / "client.crt"),
            "database.sslkey": str(certs / "client.key"),
            "database.sslpassword": "not-the-key-password",
        }))
    message = str(info.value)
    assert "\n" not in message
    assert "client.key" in message or "private key" in message, message
    assert "not-the-key-password" not in message
    assert not info.value.retriable


def test_sslfactory_is_accepted_with_one_warning() -> None:
    props = {"connector.class": "postgresql", "database.hostname": "h", "database.user": "u",
             "database.dbname": "d", "topic.prefix": "p",
             "database.sslfactory": "org.postgresql.ssl.NonValidatingFactory"}
    warnings = [w for w in cfg.from_properties(props).warnings if "database.sslfactory" in w]
    assert len(warnings) == 1, warnings
    assert "ignored" in warnings[0] and "database.sslmode" in warnings[0]
