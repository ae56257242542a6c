"""SQL Server logins, database users, roles and permissions — enforced by PostgreSQL.

Server level (logins, sysadmin, VIEW SERVER STATE) is kept by EmulatorServer through
``ServerSecurity`` and persisted in master's ``hw_emulator.logins``. Database level is kept in each
backing database's ``hw_emulator.principals`` / ``role_members`` / ``permissions`` and is
*materialized* as PostgreSQL privileges (``refresh``): every database user has a NOLOGIN
PostgreSQL role, and after every change the user's effective SQL Server permissions (GRANT; DENY
beating any GRANT reached through a role; db_datareader/db_datawriter; the CDC gating role) are
granted to that role directly, without PostgreSQL role inheritance (which knows no DENY). A
session of a login that is neither sysadmin nor db_owner runs under ``SET ROLE``, so PostgreSQL
refuses what SQL Server would refuse; the engine maps 42501 to 229 through ``denied_namer``.

The emulator's own objects stay usable by everyone, as SQL Server's catalog views are: schemas
get USAGE for PUBLIC, ``hw_emulator``/``sys`` tables SELECT for PUBLIC (except the logins), and
the functions reading CDC metadata run as their owner (SECURITY DEFINER). The CDC metadata tables
in schema ``cdc`` are not opened to PUBLIC: like SQL Server, reading them needs SELECT on them or
on schema ``cdc`` (Debezium's "no access" check relies on that)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg2.extensions

from ..results import LoginInfo, Message, Result, SqlServerError

FIXED_ROLES = ("db_owner", "db_datareader", "db_datawriter", "db_denydatareader", "db_denydatawriter",
               "db_ddladmin", "db_securityadmin", "db_accessadmin", "db_backupoperator", "public")
OBJECT_PERMISSIONS = ("SELECT", "INSERT", "UPDATE", "DELETE", "EXECUTE")
TABLE_PERMISSIONS = ("SELECT", "INSERT", "UPDATE", "DELETE")
WRITES = ("INSERT", "UPDATE", "DELETE")
INTERNAL_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast", "sys", "hw_emulator",
                    "hw_information_schema", "public")
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('hw_emulator.security'))"
_NAME = r"(\[[^\]]+\]|\"[^\"]+\"|[\w$#@]+)"

INSTALL_SQL = """
CREATE SCHEMA IF NOT EXISTS hw_emulator;
CREATE TABLE IF NOT EXISTS hw_emulator.principals (
    name text NOT NULL, type char(1) NOT NULL,     -- 'S' SQL user, 'R' database role
    login text, pg_role text, principal_id serial,
    create_date timestamp(3) NOT NULL DEFAULT localtimestamp);
CREATE UNIQUE INDEX IF NOT EXISTS principals_name ON hw_emulator.principals (lower(name));
CREATE TABLE IF NOT EXISTS hw_emulator.role_members (role text NOT NULL, member text NOT NULL,
    PRIMARY KEY (role, member));                    -- lowercased names
CREATE TABLE IF NOT EXISTS hw_emulator.permissions (
    principal text NOT NULL,                        -- lowercased
    permission text NOT NULL,                       -- SELECT, INSERT, UPDATE, DELETE, EXECUTE
    class text NOT NULL,                            -- OBJECT, SCHEMA, DATABASE
    pg_schema text NOT NULL DEFAULT '', pg_name text NOT NULL DEFAULT '',
    state char(1) NOT NULL,                         -- G grant, D deny
    PRIMARY KEY (principal, permission, class, pg_schema, pg_name));
"""

LOGINS_SQL = """
CREATE SCHEMA IF NOT EXISTS hw_emulator;
CREATE TABLE IF NOT EXISTS hw_emulator.logins (
    name text NOT NULL, name_lower text PRIMARY KEY, salt text NOT NULL, password_hash text NOT NULL,
    is_sysadmin boolean NOT NULL DEFAULT false, view_server_state char(1),
    default_database text NOT NULL DEFAULT 'master', principal_id serial,
    create_date timestamp(3) NOT NULL DEFAULT localtimestamp);
REVOKE ALL ON hw_emulator.logins FROM PUBLIC;
"""


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and ((name[0] == "[" and name[-1] == "]") or (name[0] == '"' and name[-1] == '"')):
        return name[1:-1]
    return name


def _hash(salt: str, password: str) -> str:
    return hashlib.sha256((salt + password).encode()).hexdigest()


def no_permission() -> SqlServerError:
    return SqlServerError(15247, "User does not have permission to perform this action.", severity=16, state=1)


# ---------------------------------------------------------------------------------------- server level
@dataclass
class Login:
    name: str
    salt: str
    password_hash: str
    is_sysadmin: bool = False
    view_server_state: str | None = None   # 'G' granted, 'D' denied, None
    default_database: str = "master"


class ServerSecurity:
    """The logins of an EmulatorServer (``sa`` is always there and always sysadmin)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.logins: dict[str, Login] = {}
        conn = server.pg.connect("master")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(LOGINS_SQL)
                cur.execute("SELECT name, salt, password_hash, is_sysadmin, view_server_state, default_database "
                            "FROM hw_emulator.logins")
                for row in cur.fetchall():
                    self.logins[row[0].lower()] = Login(*row)
        finally:
            conn.close()

    def _persist(self, sql: str, args: tuple[Any, ...]) -> None:
        conn = self.server.pg.connect("master")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql, args)
        finally:
            conn.close()

    def is_sysadmin(self, login: str) -> bool:
        if login.lower() == "sa":
            return True
        rec = self.logins.get(login.lower())
        return rec is not None and rec.is_sysadmin

    def has_view_server_state(self, login: str) -> bool:
        rec = self.logins.get(login.lower())
        if rec is not None and rec.view_server_state == "D" and not rec.is_sysadmin:
            return False
        return self.is_sysadmin(login) or (rec is not None and rec.view_server_state == "G")

    def authenticate(self, login: LoginInfo) -> None:
        failed = SqlServerError(18456, f"Login failed for user '{login.user}'.", severity=14, state=1)
        if login.user.lower() == "sa":
            if login.password != self.server.sa_password:
                raise failed
            default = "master"
        else:
            rec = self.logins.get(login.user.lower())
            if rec is None or _hash(rec.salt, login.password) != rec.password_hash:
                raise failed
            default = rec.default_database
        database = login.database or default
        cannot_open = SqlServerError(4060, f'Cannot open database "{database}" requested by the login. The login '
                                           "failed.", severity=11, state=1)
        if self.server.database(database) is None:
            raise cannot_open
        if not self.is_sysadmin(login.user) and database_user(self.server, database, login.user) is None:
            raise cannot_open

    def create_login(self, name: str, password: str, default_database: str | None) -> None:
        if name.lower() == "sa" or name.lower() in self.logins:
            raise SqlServerError(15025, f"The server principal '{name}' already exists.", state=1)
        salt = os.urandom(8).hex()
        rec = Login(name, salt, _hash(salt, password), default_database=default_database or "master")
        self._persist("INSERT INTO hw_emulator.logins (name, name_lower, salt, password_hash, default_database) "
                      "VALUES (%s, %s, %s, %s, %s)", (name, name.lower(), salt, rec.password_hash,
                                                      rec.default_database))
        self.logins[name.lower()] = rec

    def _existing(self, name: str, verb: str) -> Login:
        rec = self.logins.get(name.lower())
        if rec is None:
            raise SqlServerError(15151, f"Cannot {verb} the login '{name}', because it does not exist or you do not "
                                        "have permission.", state=1)
        return rec

    def alter_login_password(self, name: str, password: str) -> None:
        if name.lower() == "sa":
            self.server.sa_password = password
            return
        rec = self._existing(name, "alter")
        rec.salt = os.urandom(8).hex()
        rec.password_hash = _hash(rec.salt, password)
        self._persist("UPDATE hw_emulator.logins SET salt = %s, password_hash = %s WHERE name_lower = %s",
                      (rec.salt, rec.password_hash, name.lower()))

    def drop_login(self, name: str) -> None:
        if name.lower() == "sa":
            raise SqlServerError(15151, f"Cannot drop the login '{name}', because it does not exist or you do not "
                                        "have permission.", state=1)
        rec = self._existing(name, "drop")
        if any(s.login.user.lower() == name.lower() for s in list(self.server.sessions.values())):
            raise SqlServerError(15434, f"Could not drop login '{rec.name}' as the user is currently logged in.")
        self._persist("DELETE FROM hw_emulator.logins WHERE name_lower = %s", (name.lower(),))
        del self.logins[name.lower()]

    def set_sysadmin(self, name: str, on: bool) -> None:
        rec = self.logins.get(name.lower())
        if rec is None:
            raise SqlServerError(15151, "Cannot alter the server role 'sysadmin', because it does not exist or you "
                                        "do not have permission.", state=1)
        rec.is_sysadmin = on
        self._persist("UPDATE hw_emulator.logins SET is_sysadmin = %s WHERE name_lower = %s", (on, name.lower()))

    def set_view_server_state(self, name: str, state: str | None) -> None:
        rec = self.logins.get(name.lower())
        if rec is None:
            raise SqlServerError(15151, f"Cannot find the login '{name}', because it does not exist or you do not "
                                        "have permission.", state=1)
        rec.view_server_state = state
        self._persist("UPDATE hw_emulator.logins SET view_server_state = %s WHERE name_lower = %s",
                      (state, name.lower()))

    def server_principals(self) -> list[tuple[Any, ...]]:
        rows = [("sa", 1, b"\x01", "S", "SQL_LOGIN", False)]
        for i, rec in enumerate(sorted(self.logins.values(), key=lambda r: r.name.lower()), start=256):
            rows.append((rec.name, i, hashlib.md5(rec.name.lower().encode()).digest(), "S", "SQL_LOGIN", False))
        return rows


# ---------------------------------------------------------------------------------------- database level
@dataclass
class DbUser:
    name: str
    pg_role: str
    is_owner: bool


def pg_role_name(pgdb: str, user: str) -> str:
    raw = re.sub(r"[^a-z0-9_]", "_", f"hw_{pgdb}_{user.lower()}")
    return raw if len(raw) <= 63 else "hw_" + hashlib.md5(f"{pgdb}\0{user.lower()}".encode()).hexdigest()


def installed(cur: Any) -> bool:
    cur.execute("SELECT to_regclass('hw_emulator.principals') IS NOT NULL")
    return bool(cur.fetchone()[0])


def install(cur: Any, pgdb: str) -> None:
    """Idempotent; the caller holds a transaction."""
    cur.execute(_LOCK)
    if installed(cur):
        return
    cur.execute(INSTALL_SQL)
    if pgdb == "master":  # master lets every login in as guest, as SQL Server's does
        _create_pg_role(cur, pg_role_name(pgdb, "guest"))
        cur.execute("INSERT INTO hw_emulator.principals (name, type, login, pg_role) VALUES ('guest', 'S', NULL, %s) "
                    "ON CONFLICT DO NOTHING", (pg_role_name(pgdb, "guest"),))
    refresh(cur)


def _ensure_installed(conn: Any, pgdb: str) -> None:
    with conn.cursor() as cur:
        if installed(cur):
            return
    with conn.cursor() as cur:
        own = conn.autocommit
        if own:
            cur.execute("BEGIN")
        try:
            install(cur, pgdb)
            if own:
                cur.execute("COMMIT")
        except Exception:
            if own:
                cur.execute("ROLLBACK")
            raise


def _create_pg_role(cur: Any, role: str) -> None:
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
    if cur.fetchone() is None:
        cur.execute(f'CREATE ROLE "{role}" NOLOGIN')


def _closure(cur: Any, principal: str) -> set[str]:
    cur.execute("SELECT role, member FROM hw_emulator.role_members")
    members: dict[str, set[str]] = {}
    for role, member in cur.fetchall():
        members.setdefault(member, set()).add(role)
    return _roles_of(principal.lower(), members)


def _roles_of(principal: str, member_of: dict[str, set[str]]) -> set[str]:
    seen = {principal, "public"}
    todo = [principal]
    while todo:
        for role in member_of.get(todo.pop(), ()):
            if role not in seen:
                seen.add(role)
                todo.append(role)
    return seen


def _user_in(cur: Any, pgdb: str, login: str) -> DbUser | None:
    cur.execute("SELECT name, pg_role FROM hw_emulator.principals WHERE type = 'S' AND lower(login) = lower(%s)",
                (login,))
    row = cur.fetchone()
    if row is None and pgdb == "master":
        cur.execute("SELECT name, pg_role FROM hw_emulator.principals WHERE lower(name) = 'guest'")
        row = cur.fetchone()
    if row is None:
        return None
    roles = _closure(cur, row[0])
    return DbUser(row[0], row[1], "db_owner" in roles or row[0].lower() == "dbo")


def database_user(server: Any, database: str, login: str) -> DbUser | None:
    """The user ``login`` is in ``database`` (None: no access), read on a connection of its own."""
    info = server.database(database)
    if info is None:
        return None
    conn = server.pg.connect(info.name.lower())
    try:
        conn.autocommit = True
        _ensure_installed(conn, info.name.lower())
        with conn.cursor() as cur:
            return _user_in(cur, info.name.lower(), login)
    finally:
        conn.close()


def no_access(login: str, database: str) -> SqlServerError:
    return SqlServerError(916, f'The server principal "{login}" is not able to access the database "{database}" '
                               "under the current security context.", severity=14, state=1)


def _roles(session: Any) -> dict[str, str]:
    """pg database → the PostgreSQL role the session's connection runs under (absent: superuser)."""
    return session.__dict__.setdefault("hw_pg_roles", {})


def enter(session: Any, conn: Any, pgdb: str) -> None:
    """A new backing connection of ``session``: run it under the user's role (or refuse: 916)."""
    login = session.login.user
    _roles(session).pop(pgdb, None)
    if session.server.security.is_sysadmin(login):
        return
    _ensure_installed(conn, pgdb)
    with conn.cursor() as cur:
        user = _user_in(cur, pgdb, login)
        if user is None:
            info = session.server.database(pgdb)
            raise no_access(login, info.name if info else pgdb)
        if user.is_owner:
            return
        cur.execute(f'SET ROLE "{user.pg_role}"')
    _roles(session)[pgdb] = user.pg_role


def check_access(session: Any, database: str) -> None:
    """USE: the login needs a user (or guest) in the database."""
    login = session.login.user
    if session.server.security.is_sysadmin(login):
        return
    if database_user(session.server, database, login) is None:
        raise no_access(login, session.server.database(database).name)


@contextlib.contextmanager
def elevated(session: Any, conn: Any) -> Iterator[None]:
    """System procedures run with the server's rights and check the caller themselves."""
    role = next((r for db, r in _roles(session).items() if session._conns.get(db) is conn), None)
    if role is None:
        yield
        return
    with conn.cursor() as cur:
        cur.execute("RESET ROLE")
    try:
        yield
    finally:
        # a failed transaction is rolled back by the caller, which undoes the RESET ROLE as well
        if not conn.closed and conn.get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_INERROR:
            with conn.cursor() as cur:
                cur.execute(f'SET ROLE "{role}"')


def cdc_rights(session: Any, conn: Any, database: str) -> dict[str, Any]:
    """The CdcContext fields for the caller."""
    login = session.login.user
    if session.server.security.is_sysadmin(login):
        return {"is_sysadmin": True, "is_db_owner": True}
    pgdb = database.lower()
    with conn.cursor() as cur:
        if not installed(cur):
            return {"is_sysadmin": False, "is_db_owner": False, "can_access_role": lambda role: role is None}
        user = _user_in(cur, pgdb, login)
        roles = _closure(cur, user.name) if user is not None else {"public"}
    owner = user is not None and user.is_owner

    def can_read_source(schema: str, name: str) -> bool:
        if owner:
            return True
        if user is None:
            return False
        with conn.cursor() as cur:
            cur.execute("SELECT bool_and(has_table_privilege(%s, format('%%I.%%I', pg_schema, pg_name), 'SELECT')) "
                        "FROM hw_emulator.objects WHERE lower(schema_name) = lower(%s) AND lower(name) = lower(%s)",
                        (user.pg_role, schema, name))
            return bool(cur.fetchone()[0])

    return {"is_sysadmin": False, "is_db_owner": owner, "can_read_source": can_read_source,
            "can_access_role": lambda role: owner or role is None or role.lower() in roles}


def require_ddl(session: Any, database: str, statement: str | None = None) -> None:
    """DDL needs db_owner here (db_ddladmin and CREATE/ALTER permissions are not emulated)."""
    session._conn(database)  # opening the connection settles the session's role there
    if database.lower() not in _roles(session):
        return
    if statement is not None:
        raise SqlServerError(262, f"{statement} permission denied in database '{database}'.", severity=14,
                             state=1, aborts_batch=False)
    raise no_permission()


def lock_table(session: Any, conn: Any, cur: Any, relation: str, mode: str) -> None:
    """WITH (TABLOCK…) hints: SQL Server needs only SELECT, PostgreSQL's SHARE/EXCLUSIVE locks want
    UPDATE or DELETE — so the lock is taken as the server, once the user may read the table."""
    lock = f"LOCK TABLE {relation} IN {mode} MODE"
    role = next((r for db, r in _roles(session).items() if session._conns.get(db) is conn), None)
    if role is None:
        cur.execute(lock)
        return
    cur.execute("SELECT has_table_privilege(%s, %s, 'SELECT')", (role, relation))
    if not cur.fetchone()[0]:
        return  # the statement itself fails with 229
    # inside the statement's transaction: if the lock fails (1222), the caller's rollback (to its
    # savepoint) undoes the RESET ROLE too
    cur.execute("RESET ROLE")
    cur.execute(lock)
    cur.execute(f'SET ROLE "{role}"')


def check_server_view(session: Any, name: str) -> None:
    if name.startswith("dm_") and not session.server.security.has_view_server_state(session.login.user):
        # SQL Server answers with two errors: 300, then 297 ending the statement
        err = SqlServerError(297, "The user does not have permission to perform this action.", severity=16,
                             state=1, aborts_batch=False)
        err.preceding = [Message(300, "VIEW SERVER STATE permission was denied on object 'server', database "  # type: ignore[attr-defined]
                                      "'master'.", 14, 1)]
        raise err


# ---------------------------------------------------------------------------------------- materialization
def refresh(cur: Any) -> None:
    """Make PostgreSQL's privileges say what the SQL Server permissions say (caller's transaction)."""
    cur.execute(_LOCK)
    cur.execute("SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> "
                "'information_schema'")
    schemas = [r[0] for r in cur.fetchall()]
    stmts = [f'GRANT USAGE ON SCHEMA {", ".join(_q(s) for s in schemas)} TO PUBLIC',
             f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {", ".join(_q(s) for s in schemas)} TO PUBLIC']
    internal = [s for s in ("sys", "hw_emulator", "hw_information_schema") if s in schemas]
    if internal:
        stmts.append(f'GRANT SELECT ON ALL TABLES IN SCHEMA {", ".join(_q(s) for s in internal)} TO PUBLIC')
    cur.execute("; ".join(stmts))
    cur.execute("SELECT to_regclass('hw_emulator.logins') IS NOT NULL")
    if cur.fetchone()[0]:
        cur.execute("REVOKE ALL ON hw_emulator.logins FROM PUBLIC")
    # functions reading the CDC metadata behave as SQL Server's public system functions
    cur.execute(r"""SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                    WHERE n.nspname IN ('sys', 'cdc', 'hw_emulator') AND p.prokind = 'f' AND NOT p.prosecdef
                      AND p.prosrc ~ '(cdc|hw_emulator)\.' AND p.proname NOT LIKE 'fn\_cdc\_get\_%\_changes\_%'""")
    for (fn,) in cur.fetchall():
        cur.execute(f"ALTER FUNCTION {fn} SECURITY DEFINER")

    cur.execute("SELECT lower(name), pg_role FROM hw_emulator.principals WHERE type = 'S' AND pg_role IS NOT NULL")
    users = cur.fetchall()
    if not users:
        return
    cur.execute("SELECT role, member FROM hw_emulator.role_members")
    member_of: dict[str, set[str]] = {}
    for role, member in cur.fetchall():
        member_of.setdefault(member, set()).add(role)
    cur.execute("SELECT principal, permission, class, pg_schema, pg_name, state FROM hw_emulator.permissions")
    perms = cur.fetchall()
    user_schemas = [s for s in schemas if s not in INTERNAL_SCHEMAS]
    cur.execute("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'v', 'p', 'm', 'f') AND n.nspname = ANY(%s)", (user_schemas,))
    relations = cur.fetchall()
    gates = _gates(cur)

    def allowed(roles: set[str], perm: str, nsp: str, rel: str) -> bool:
        states = {st for pr, pm, cls, s, o, st in perms if pr in roles and pm == perm and (
            cls == "DATABASE" or (cls == "SCHEMA" and s == nsp) or (cls == "OBJECT" and s == nsp and o == rel))}
        if "D" in states or (perm == "SELECT" and "db_denydatareader" in roles) or (
                perm in WRITES and "db_denydatawriter" in roles):
            return False
        return "G" in states or (perm == "SELECT" and "db_datareader" in roles) or (
            perm in WRITES and "db_datawriter" in roles)

    out = []
    for user, pg_role in users:
        role = _q(pg_role)
        if user_schemas:
            out.append(f'REVOKE ALL ON ALL TABLES IN SCHEMA {", ".join(_q(s) for s in user_schemas)} FROM {role}')
        roles = _roles_of(user, member_of)
        for nsp, rel in relations:
            granted = [p for p in TABLE_PERMISSIONS if allowed(roles, p, nsp, rel)]
            gate = gates.get((nsp, rel))
            if gate is not None:  # a change table: the gating role AND (SELECT on it OR on the source)
                gating_role, source = gate
                readable = ("SELECT" in granted or allowed(roles, "SELECT", *source)) and (
                    gating_role is None or gating_role.lower() in roles)
                granted = [p for p in granted if p != "SELECT"] + (["SELECT"] if readable else [])
            if granted:
                out.append(f"GRANT {', '.join(granted)} ON TABLE {_q(nsp)}.{_q(rel)} TO {role}")
    if out:
        cur.execute("; ".join(out))


def _gates(cur: Any) -> dict[tuple[str, str], tuple[str | None, tuple[str, str]]]:
    """Change table (pg schema, pg name) → (gating role, source table's pg schema and name)."""
    cur.execute("SELECT to_regclass('cdc.change_tables') IS NOT NULL")
    if not cur.fetchone()[0]:
        return {}
    cur.execute("""SELECT ct_obj.pg_schema, ct_obj.pg_name, ct.role_name, src.pg_schema, src.pg_name
                   FROM cdc.change_tables ct
                   JOIN hw_emulator.objects ct_obj ON ct_obj.object_id = ct.object_id
                   JOIN hw_emulator.objects src ON src.object_id = ct.source_object_id""")
    return {(r[0], r[1]): (r[2], (r[3], r[4])) for r in cur.fetchall()}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def after_ddl(cur: Any) -> None:
    """New tables must get the grants SQL Server's schema-level and role permissions give them."""
    if installed(cur):
        cur.execute("SELECT EXISTS (SELECT 1 FROM hw_emulator.principals WHERE type = 'S')")
        if cur.fetchone()[0]:
            refresh(cur)


def after_cdc_procedure(cur: Any, procedure: str, pgdb: str) -> None:
    """sp_cdc_enable_table creates its @role_name when missing (as SQL Server does); new change
    tables get their grants."""
    if procedure not in ("sp_cdc_enable_table", "sp_cdc_disable_table", "sp_cdc_enable_db", "sp_cdc_disable_db"):
        return
    cur.execute("SELECT to_regclass('cdc.change_tables') IS NOT NULL")
    if cur.fetchone()[0]:
        cur.execute("SELECT DISTINCT role_name FROM cdc.change_tables WHERE role_name IS NOT NULL")
        gating = [r[0] for r in cur.fetchall()]
        if gating:
            install(cur, pgdb)
            for role in gating:
                cur.execute("INSERT INTO hw_emulator.principals (name, type) SELECT %s, 'R' WHERE NOT EXISTS "
                            "(SELECT 1 FROM hw_emulator.principals WHERE lower(name) = lower(%s))", (role, role))
    after_ddl(cur)


# ---------------------------------------------------------------------------------------- 42501 → 229
def denied_namer(session: Any, q: Any, info: Any) -> Callable[[str, str], tuple[str, str, str] | None]:
    """For errors.Namer: which permission was denied on which object, as SQL Server names them."""

    def denied(kind: str, pg_name: str) -> tuple[str, str, str] | None:
        if info is None:
            return None
        role = _roles(session).get(info.name.lower())
        conn = session.server.pg.connect(info.name.lower())
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT o.schema_name, o.name, o.pg_schema FROM hw_emulator.objects o "
                            "WHERE o.pg_name = %s ORDER BY o.pg_schema = 'cdc'", (pg_name,))
                row = cur.fetchone()
                schema, name, pg_schema = row if row else ("dbo", pg_name, "dbo")
                if kind != "table":
                    return "EXECUTE" if kind == "function" else "SELECT", name, schema
                statement = {"insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}.get(q.kind, "SELECT")
                target = getattr(q, "target", None)
                is_target = statement != "SELECT" and (target is None or getattr(target, "pg_name", "") == pg_name)
                candidates = [statement, "SELECT"] if is_target else ["SELECT"]
                permission = candidates[0]
                if role is not None:
                    for p in candidates:
                        cur.execute("SELECT has_table_privilege(%s, format('%%I.%%I', %s::text, %s::text), %s)",
                                    (role, pg_schema, pg_name, p))
                        if not cur.fetchone()[0]:
                            permission = p
                            break
                if schema.lower() == "cdc" and name.lower().endswith("_ct") and pg_name.lower() not in q.written:
                    # read through cdc.fn_cdc_get_all_changes_<ci> (the engine inlines it): SQL Server
                    # names the function
                    name = f"fn_cdc_get_all_changes_{name[:-3]}"
                return permission, name, schema
        finally:
            conn.close()

    return denied


# ---------------------------------------------------------------------------------------- statements
_SECURITY_STATEMENTS = {("CREATE", "LOGIN"), ("ALTER", "LOGIN"), ("DROP", "LOGIN"), ("CREATE", "USER"),
                        ("DROP", "USER"), ("CREATE", "ROLE"), ("DROP", "ROLE"), ("ALTER", "ROLE"),
                        ("ALTER", "SERVER")}


def handles(keyword: str, word1: str) -> bool:
    return keyword in ("GRANT", "DENY", "REVOKE") or (keyword, word1) in _SECURITY_STATEMENTS


def execute(session: Any, text: str) -> Iterator[Result]:
    text = text.strip().rstrip(";").strip()
    login = session.login.user
    sec: ServerSecurity = session.server.security
    m = re.match(rf"^CREATE\s+LOGIN\s+{_NAME}\s+WITH\s+PASSWORD\s*=\s*N?'((?:[^']|'')*)'(.*)$", text,
                 re.IGNORECASE | re.DOTALL)
    if m:
        _require_sysadmin(sec, login)
        dm = re.search(rf"DEFAULT_DATABASE\s*=\s*{_NAME}", m.group(3), re.IGNORECASE)
        sec.create_login(_unquote(m.group(1)), m.group(2).replace("''", "'"), _unquote(dm.group(1)) if dm else None)
        return
    m = re.match(rf"^ALTER\s+LOGIN\s+{_NAME}\s+WITH\s+PASSWORD\s*=\s*N?'((?:[^']|'')*)'(.*)$", text,
                 re.IGNORECASE | re.DOTALL)
    if m:
        name = _unquote(m.group(1))
        if name.lower() != login.lower():
            _require_sysadmin(sec, login)
        sec.alter_login_password(name, m.group(2).replace("''", "'"))
        return
    m = re.match(rf"^DROP\s+LOGIN\s+{_NAME}$", text, re.IGNORECASE)
    if m:
        _require_sysadmin(sec, login)
        sec.drop_login(_unquote(m.group(1)))
        return
    m = re.match(rf"^ALTER\s+SERVER\s+ROLE\s+{_NAME}\s+(ADD|DROP)\s+MEMBER\s+{_NAME}$", text, re.IGNORECASE)
    if m:
        _require_sysadmin(sec, login)
        if _unquote(m.group(1)).lower() != "sysadmin":
            raise SqlServerError(50000, f"emulator: server role {_unquote(m.group(1))} is not supported")
        sec.set_sysadmin(_unquote(m.group(3)), m.group(2).upper() == "ADD")
        return
    m = re.match(r"^(GRANT|DENY|REVOKE)\s+VIEW\s+SERVER\s+STATE\s+(?:TO|FROM)\s+" + _NAME + r"(?:\s+CASCADE)?$",
                 text, re.IGNORECASE)
    if m:
        _require_sysadmin(sec, login)
        if session.database.lower() != "master":
            raise SqlServerError(4621, "Permissions at the server scope can only be granted when the current "
                                       "database is master")
        sec.set_view_server_state(_unquote(m.group(2)), {"GRANT": "G", "DENY": "D", "REVOKE": None}[
            m.group(1).upper()])
        return
    if re.match(r"^(CREATE|ALTER|DROP)\s+LOGIN\b", text, re.IGNORECASE):
        raise SqlServerError(50000, "emulator: this LOGIN statement form is not supported (only WITH PASSWORD)")
    database = session.database
    _require_owner(session, database)

    def act(cur: Any) -> None:
        install(cur, database.lower())
        _database_statement(session, cur, database, text)  # Session._ddl then refreshes the grants
    session._ddl(database, act)
    return
    yield


def _require_sysadmin(sec: ServerSecurity, login: str) -> None:
    if not sec.is_sysadmin(login):
        raise no_permission()


def _require_owner(session: Any, database: str) -> None:
    if session.server.security.is_sysadmin(session.login.user):
        return
    user = database_user(session.server, database, session.login.user)
    if user is None or not user.is_owner:
        raise no_permission()


def _principal(cur: Any, name: str) -> tuple[str, str] | None:
    cur.execute("SELECT name, type FROM hw_emulator.principals WHERE lower(name) = lower(%s)", (name,))
    row = cur.fetchone()
    if row is None and name.lower() in FIXED_ROLES:
        return name.lower(), "R"
    if row is None and name.lower() == "dbo":
        return "dbo", "S"
    return row


def _database_statement(session: Any, cur: Any, database: str, text: str) -> None:
    pgdb = database.lower()
    m = re.match(rf"^CREATE\s+USER\s+{_NAME}(?:\s+(?:FOR|FROM)\s+LOGIN\s+{_NAME}|\s+(WITHOUT\s+LOGIN))?"
                 r"(?:\s+WITH\s+DEFAULT_SCHEMA\s*=\s*\S+)?$", text, re.IGNORECASE)
    if m:
        name = _unquote(m.group(1))
        login_name = None if m.group(3) else _unquote(m.group(2) or m.group(1))
        if _principal(cur, name) is not None:
            raise SqlServerError(15023, f"User, group, or role '{name}' already exists in the current database.")
        if login_name is not None:
            if login_name.lower() != "sa" and login_name.lower() not in session.server.security.logins:
                raise SqlServerError(15007, f"'{login_name}' is not a valid login or you do not have permission.")
            if login_name.lower() == "sa":
                raise SqlServerError(15063, "The login already has an account under a different user name.")
            cur.execute("SELECT 1 FROM hw_emulator.principals WHERE lower(login) = lower(%s)", (login_name,))
            if cur.fetchone():
                raise SqlServerError(15063, "The login already has an account under a different user name.")
        role = pg_role_name(pgdb, name)
        _create_pg_role(cur, role)
        cur.execute("INSERT INTO hw_emulator.principals (name, type, login, pg_role) VALUES (%s, 'S', %s, %s)",
                    (name, login_name, role))
        return
    m = re.match(rf"^DROP\s+(USER|ROLE)\s+(IF\s+EXISTS\s+)?{_NAME}$", text, re.IGNORECASE)
    if m:
        kind, name = m.group(1).upper(), _unquote(m.group(3))
        cur.execute("SELECT name, pg_role FROM hw_emulator.principals WHERE lower(name) = lower(%s) AND type = %s",
                    (name, "S" if kind == "USER" else "R"))
        row = cur.fetchone()
        if row is None:
            if m.group(2):
                return
            raise SqlServerError(15151, f"Cannot drop the {kind.lower()} '{name}', because it does not exist or you "
                                        "do not have permission.")
        if kind == "ROLE":
            cur.execute("SELECT 1 FROM hw_emulator.role_members WHERE role = lower(%s)", (name,))
            if cur.fetchone():
                raise SqlServerError(15144, "The role has members. It must be empty before it can be dropped.")
        cur.execute("DELETE FROM hw_emulator.principals WHERE lower(name) = lower(%s)", (name,))
        cur.execute("DELETE FROM hw_emulator.role_members WHERE member = lower(%s) OR role = lower(%s)", (name, name))
        cur.execute("DELETE FROM hw_emulator.permissions WHERE principal = lower(%s)", (name,))
        if row[1]:
            cur.execute(f"DROP OWNED BY {_q(row[1])}")
            cur.execute(f"DROP ROLE {_q(row[1])}")
        return
    m = re.match(rf"^CREATE\s+ROLE\s+{_NAME}(?:\s+AUTHORIZATION\s+\S+)?$", text, re.IGNORECASE)
    if m:
        name = _unquote(m.group(1))
        if _principal(cur, name) is not None:
            raise SqlServerError(15023, f"User, group, or role '{name}' already exists in the current database.")
        cur.execute("INSERT INTO hw_emulator.principals (name, type) VALUES (%s, 'R')", (name,))
        return
    m = re.match(rf"^ALTER\s+ROLE\s+{_NAME}\s+(ADD|DROP)\s+MEMBER\s+{_NAME}$", text, re.IGNORECASE)
    if m:
        role, member = _unquote(m.group(1)), _unquote(m.group(3))
        found = _principal(cur, role)
        if found is None or found[1] != "R" or role.lower() == "public":
            raise SqlServerError(15151, f"Cannot alter the role '{role}', because it does not exist or you do not "
                                        "have permission.")
        if _principal(cur, member) is None:
            raise SqlServerError(15151, f"Cannot {'add' if m.group(2).upper() == 'ADD' else 'drop'} the principal "
                                        f"'{member}', because it does not exist or you do not have permission.")
        if m.group(2).upper() == "ADD":
            cur.execute("INSERT INTO hw_emulator.role_members VALUES (lower(%s), lower(%s)) ON CONFLICT DO NOTHING",
                        (role, member))
        else:
            cur.execute("DELETE FROM hw_emulator.role_members WHERE role = lower(%s) AND member = lower(%s)",
                        (role, member))
        return
    m = re.match(r"^(GRANT|DENY|REVOKE)\s+(?:GRANT\s+OPTION\s+FOR\s+)?(.+?)(?:\s+ON\s+(.+?))?\s+(?:TO|FROM)\s+(.+?)"
                 r"(?:\s+WITH\s+GRANT\s+OPTION)?(?:\s+CASCADE)?(?:\s+AS\s+\S+)?$", text, re.IGNORECASE | re.DOTALL)
    if m:
        _permission_statement(session, cur, m.group(1).upper(), m.group(2), m.group(3), m.group(4))
        return
    raise SqlServerError(50000, f"emulator: this statement is not supported: {text.split(None, 2)[:2]}")


def _permission_statement(session: Any, cur: Any, verb: str, perms_text: str, securable: str | None,
                          principals_text: str) -> None:
    perms = [p.strip().upper() for p in perms_text.split(",")]
    for p in perms:
        if "(" in p:
            raise SqlServerError(50000, "emulator: column-level permissions are not supported")
        if p not in OBJECT_PERMISSIONS:
            raise SqlServerError(50000, f"emulator: permission {p} is not supported")
    if securable is None:
        cls, pg_schema, pg_name = "DATABASE", "", ""
    else:
        sm = re.match(r"^(OBJECT|SCHEMA)\s*::\s*(.+)$", securable.strip(), re.IGNORECASE)
        cls, target = (sm.group(1).upper(), sm.group(2)) if sm else ("OBJECT", securable)
        if cls == "SCHEMA":
            name = _unquote(target)
            cur.execute("SELECT nspname FROM pg_namespace WHERE nspname = lower(%s)", (name,))
            row = cur.fetchone()
            if row is None:
                raise SqlServerError(15151, f"Cannot find the schema '{name}', because it does not exist or you do not "
                                            "have permission.")
            pg_schema, pg_name = row[0], ""
        else:
            parts = [_unquote(p) for p in re.findall(r"\[[^\]]+\]|\"[^\"]+\"|[^.\s]+", target)]
            schema, name = (parts[-2], parts[-1]) if len(parts) >= 2 else ("dbo", parts[-1])
            obj = session.lookup(session.database, schema, name)
            if obj is not None:
                pg_schema, pg_name = obj.pg_schema, obj.pg_name
            else:
                cur.execute("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                            "WHERE n.nspname = lower(%s) AND c.relname = lower(%s)", (schema, name))
                row = cur.fetchone()
                if row is None:
                    raise SqlServerError(15151, f"Cannot find the object '{name}', because it does not exist or you "
                                                "do not have permission.")
                pg_schema, pg_name = row
    for raw in principals_text.split(","):
        principal = _unquote(raw)
        if _principal(cur, principal) is None:
            raise SqlServerError(15151, f"Cannot find the user '{principal}', because it does not exist or you do not "
                                        "have permission.")
        for p in perms:
            cur.execute("DELETE FROM hw_emulator.permissions WHERE principal = lower(%s) AND permission = %s AND "
                        "class = %s AND pg_schema = %s AND pg_name = %s", (principal, p, cls, pg_schema, pg_name))
            if verb != "REVOKE":
                cur.execute("INSERT INTO hw_emulator.permissions VALUES (lower(%s), %s, %s, %s, %s, %s)",
                            (principal, p, cls, pg_schema, pg_name, "G" if verb == "GRANT" else "D"))
