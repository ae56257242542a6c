"""The Engine API (DESIGN.md): EmulatorServer (databases, logins, sessions, server-level catalogs)
and Session (T-SQL batches and RPCs over per-database PostgreSQL connections)."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from typing import Any

from ..results import LoginInfo, SqlServerError
from ..sqltypes import SqlType
from .bootstrap import install_sql
from .registry import Registry

VERSION = ("Microsoft SQL Server 2022 (RTM-CU12) (KB5033663) - 16.0.4115.5 (X64) \n\tMar  4 2024 08:56:10 \n\t"
           "Copyright (C) 2022 Microsoft Corporation\n\tDeveloper Edition (64-bit) on Linux (Headwater emulator) "
           "<X64>")
PRODUCT_VERSION = "16.0.4115.5"
COLLATION = "SQL_Latin1_General_CP1_CI_AS"


class DatabaseInfo:
    def __init__(self, name: str, database_id: int) -> None:
        self.name = name
        self.database_id = database_id
        self.allow_snapshot = False
        self.read_committed_snapshot = False
        self.registry = Registry()
        self.composites: dict[int, str] | None = None


class EmulatorServer:
    def __init__(self, pg: Any, sa_password: str, *, capture_interval: float = 0.5,
                 time_zone: str | None = None) -> None:
        """``time_zone``: the server's time zone (IANA name or PostgreSQL offset spec) for GETDATE(),
        SYSDATETIMEOFFSET() and the capture job's times; None = the backing PostgreSQL's setting."""
        self.pg = pg
        self.time_zone = time_zone
        self.sa_password = sa_password
        self.server_name = socket.gethostname().split(".")[0].upper() or "HEADWATER"
        self._lock = threading.RLock()
        self._spids = itertools.count(51)
        self.databases: dict[str, DatabaseInfo] = {}
        self.sessions: dict[int, Any] = {}
        self._next_db_id = 5
        self.jobs: Any = None
        try:
            from ..cdc.capture import CaptureJobs
            self.jobs = CaptureJobs(pg, interval=capture_interval, time_zone=time_zone)
        except ImportError:  # the cdc layer is optional for the SQL layer's own tests
            self.jobs = None
        self._agent_running = True
        self.cdc_install_error: str | None = None
        self._discover()
        if "master" not in self.databases:
            self._create_backing("master")
        from .security import ServerSecurity
        self.security = ServerSecurity(self)  # logins, kept in master (engine/security.py)
        if self.jobs is not None:
            try:
                self.jobs.start_enabled([d.name for d in self.databases.values()])
            except Exception:
                pass

    # ------------------------------------------------------------------ databases
    def _discover(self) -> None:
        """Databases from an earlier run of the emulator over the same PostgreSQL."""
        conn = self.pg.connect("postgres")
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT datname FROM pg_database WHERE NOT datistemplate AND datname <> 'postgres'")
                names = [r[0] for r in cur.fetchall()]
        finally:
            conn.close()
        for pgname in sorted(names):
            try:
                c = self.pg.connect(pgname)
            except Exception:
                continue
            try:
                with c.cursor() as cur:
                    cur.execute("SELECT to_regclass('hw_emulator.settings') IS NOT NULL")
                    if not cur.fetchone()[0]:
                        continue
                    cur.execute("SELECT name, value FROM hw_emulator.settings")
                    settings = dict(cur.fetchall())
            finally:
                c.close()
            name = settings.get("name", pgname)
            info = DatabaseInfo(name, int(settings.get("database_id", 1 if pgname == "master" else self._next_db_id)))
            info.allow_snapshot = settings.get("allow_snapshot") == "1"
            info.read_committed_snapshot = settings.get("read_committed_snapshot") == "1"
            self._next_db_id = max(self._next_db_id, info.database_id + 1)
            self.databases[pgname] = info

    def _create_backing(self, name: str) -> DatabaseInfo:
        pgname = name.lower()
        with self._lock:
            database_id = 1 if pgname == "master" else self._next_db_id
            if pgname != "master":
                self._next_db_id += 1
        admin = self.pg.connect("postgres")
        try:
            with admin.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (pgname,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{pgname}"')
        finally:
            admin.close()
        conn = self.pg.connect(pgname)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT to_regclass('hw_emulator.settings') IS NOT NULL")
                if not cur.fetchone()[0]:
                    cur.execute(install_sql())
                    try:
                        from ..cdc.objects import install_system_objects
                    except ImportError:
                        install_system_objects = None
                    if install_system_objects is not None:
                        try:
                            install_system_objects(cur)
                        except Exception as exc:
                            self.cdc_install_error = f"{type(exc).__name__}: {exc}"
                cur.execute("INSERT INTO hw_emulator.settings VALUES ('name', %s), ('database_id', %s) "
                            "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value", (name, str(database_id)))
        finally:
            conn.close()
        info = DatabaseInfo(name, database_id)
        self.databases[pgname] = info
        return info

    def create_database(self, name: str) -> None:
        with self._lock:
            if name.lower() in self.databases:
                raise SqlServerError(1801, f"Database '{name}' already exists. Choose a different database name.")
            self._create_backing(name)

    def drop_database(self, name: str) -> None:
        with self._lock:
            info = self.databases.get(name.lower())
            if info is None:
                raise SqlServerError(3701, f"Cannot drop the database '{name}', because it does not exist or you do "
                                           "not have permission.", severity=11)
            if info.name.lower() == "master":
                raise SqlServerError(3708, "Cannot drop the database 'master' because it is a system database.")
            for s in list(self.sessions.values()):
                s._forget_database(info.name)
            if self.jobs is not None:
                try:
                    self.jobs.stop(info.name)
                except Exception:
                    pass
            admin = self.pg.connect("postgres")
            try:
                self._drop_slots(admin, info.name.lower())
                with admin.cursor() as cur:
                    cur.execute(f'DROP DATABASE "{info.name.lower()}" WITH (FORCE)')
            finally:
                admin.close()
            del self.databases[name.lower()]

    @staticmethod
    def _drop_slots(admin: Any, pgname: str, timeout: float = 10.0) -> None:
        """The capture job's replication slot keeps a database from being dropped: end its reader, drop it."""
        deadline = time.monotonic() + timeout
        with admin.cursor() as cur:
            while True:
                cur.execute("SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = %s", (pgname,))
                slots = cur.fetchall()
                if not slots:
                    return
                for slot, pid in slots:
                    if pid is not None:
                        cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
                        continue
                    try:
                        cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                    except Exception:  # the slot became active again in between; try again
                        if time.monotonic() > deadline:
                            raise
                if time.monotonic() > deadline:
                    raise SqlServerError(3702, f'Cannot drop database "{pgname}" because it is currently in use.')
                time.sleep(0.1)

    def database(self, name: str) -> DatabaseInfo | None:
        return self.databases.get(name.lower())

    def set_database_option(self, name: str, option: str, on: bool) -> None:
        info = self.databases[name.lower()]
        key = {"allow_snapshot_isolation": "allow_snapshot", "read_committed_snapshot": "read_committed_snapshot"}[
            option]
        setattr(info, "allow_snapshot" if key == "allow_snapshot" else "read_committed_snapshot", on)
        conn = self.pg.connect(info.name.lower())
        try:
            with conn.cursor() as cur:
                cur.execute("INSERT INTO hw_emulator.settings VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET "
                            "value = EXCLUDED.value", (key, "1" if on else "0"))
        finally:
            conn.close()

    # ------------------------------------------------------------------ logins and sessions
    def authenticate(self, login: LoginInfo) -> None:
        self.security.authenticate(login)  # 18456 / 4060

    def open_session(self, login: LoginInfo) -> Any:
        from .session import Session
        spid = next(self._spids)
        session = Session(self, spid, login)
        with self._lock:
            self.sessions[spid] = session
        return session

    def _session_closed(self, spid: int) -> None:
        with self._lock:
            self.sessions.pop(spid, None)

    def close(self) -> None:
        for s in list(self.sessions.values()):
            try:
                s.close()
            except Exception:
                pass
        if self.jobs is not None:
            self.jobs.close()

    # ------------------------------------------------------------------ server-level catalogs
    @property
    def agent_running(self) -> bool:
        return self.jobs.agent_running if self.jobs is not None else self._agent_running

    @agent_running.setter
    def agent_running(self, running: bool) -> None:
        if self.jobs is not None:
            self.jobs.agent_running = running
        self._agent_running = running

    def server_view(self, name: str, current_db: str) -> tuple[list[tuple[str, SqlType]], list[tuple[Any, ...]]] | None:
        nv = SqlType("nvarchar", length=128)
        if name == "databases":
            cols = [("name", nv), ("database_id", SqlType("int")), ("source_database_id", SqlType("int")),
                    ("owner_sid", SqlType("varbinary", length=85)), ("create_date", SqlType("datetime")),
                    ("compatibility_level", SqlType("tinyint")), ("collation_name", nv),
                    ("user_access", SqlType("tinyint")), ("user_access_desc", SqlType("nvarchar", length=60)),
                    ("is_read_only", SqlType("bit")), ("state", SqlType("tinyint")),
                    ("state_desc", SqlType("nvarchar", length=60)),
                    ("snapshot_isolation_state", SqlType("tinyint")),
                    ("snapshot_isolation_state_desc", SqlType("nvarchar", length=60)),
                    ("is_read_committed_snapshot_on", SqlType("bit")), ("recovery_model", SqlType("tinyint")),
                    ("recovery_model_desc", SqlType("nvarchar", length=60)), ("is_cdc_enabled", SqlType("bit")),
                    ("is_broker_enabled", SqlType("bit"))]
            rows = []
            for info in sorted(self.databases.values(), key=lambda d: d.database_id):
                rows.append((info.name, info.database_id, None, b"\x01", None, 160, COLLATION, 0, "MULTI_USER",
                             False, 0, "ONLINE", 1 if info.allow_snapshot else 0,
                             "ON" if info.allow_snapshot else "OFF", info.read_committed_snapshot,
                             1, "FULL", self._cdc_enabled(info), False))
            return cols, rows
        if name == "dm_server_services":
            cols = [("servicename", SqlType("nvarchar", length=256)), ("startup_type", SqlType("int")),
                    ("startup_type_desc", SqlType("nvarchar", length=256)), ("status", SqlType("int")),
                    ("status_desc", SqlType("nvarchar", length=256)), ("process_id", SqlType("int")),
                    ("last_startup_time", SqlType("datetimeoffset", scale=7)),
                    ("service_account", SqlType("nvarchar", length=256)),
                    ("filename", SqlType("nvarchar", length=256)), ("is_clustered", SqlType("nvarchar", length=1)),
                    ("cluster_nodename", SqlType("nvarchar", length=256))]
            agent = 4 if self.agent_running else 1
            rows = [("SQL Server (MSSQLSERVER)", 2, "Automatic", 4, "Running", 1, None, "LocalSystem",
                     "sqlservr", "N", None),
                    ("SQL Server Agent (MSSQLSERVER)", 2, "Automatic", agent, "Running" if agent == 4 else "Stopped",
                     2 if agent == 4 else None, None, "LocalSystem", "sqlagent", "N", None)]
            return cols, rows
        if name in ("server_principals", "sql_logins"):
            cols = [("name", nv), ("principal_id", SqlType("int")), ("sid", SqlType("varbinary", length=85)),
                    ("type", SqlType("char", length=1)), ("type_desc", SqlType("nvarchar", length=60)),
                    ("is_disabled", SqlType("bit"))]
            return cols, self.security.server_principals()
        return None

    def _cdc_enabled(self, info: DatabaseInfo) -> bool:
        try:
            conn = self.pg.connect(info.name.lower())
        except Exception:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT to_regclass('cdc.change_tables') IS NOT NULL")
                return bool(cur.fetchone()[0])
        finally:
            conn.close()

    def server_property(self, name: str) -> Any:
        props: dict[str, Any] = {
            "productversion": PRODUCT_VERSION, "productmajorversion": "16", "productminorversion": "0",
            "productlevel": "RTM", "productupdatelevel": "CU12", "edition": "Developer Edition (64-bit)",
            "engineedition": 3, "editionid": -2117995310, "machinename": self.server_name,
            "servername": self.server_name, "instancename": None, "collation": COLLATION,
            "ishadrenabled": 0, "isclustered": 0, "isintegratedsecurityonly": 0, "isfulltextinstalled": 0,
            "issingleuser": 0, "lcid": 1033, "sqlcharset": 1, "sqlcharsetname": "iso_1", "sqlsortorder": 52,
            "sqlsortordername": "nocase_iso", "buildclrversion": "v4.0.30319", "processid": 1,
            "isxtpsupported": 1, "hadrmanagerstatus": None, "resourceversion": PRODUCT_VERSION,
        }
        return props.get(name.lower())


from .session import Session  # noqa: E402  (Session lives in its own module; the Engine API names it here)

__all__ = ["EmulatorServer", "Session"]
