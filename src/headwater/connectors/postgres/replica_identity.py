"""`replica.identity.autoset.values` (spec PG-89, PG-118, PG-298): set the replica identity of
captured tables when streaming starts, as Debezium 3.6.3 does.

What Debezium does (PostgresReplicationConnection.initReplicaIdentity, ReplicaIdentityMapper),
and so what this module does:

- It runs every time streaming starts (after the snapshot, before the stream is opened; again on
  each restart), never in a snapshot-only run.
- It looks at the captured tables only (the table/schema filters; ordinary and partitioned
  tables), in `schema.table` order. Each entry's table regex must match the whole `schema.table`,
  case-insensitively. A table matched by no entry is left alone; a table matched by more than one
  entry is left alone with an error in the log.
- The current identity is read first; when it is already the wanted one nothing is executed.
  Otherwise `ALTER TABLE <schema>.<table> REPLICA IDENTITY DEFAULT|FULL|NOTHING|USING INDEX <index>`.
- A failed ALTER TABLE (the user does not own the table, an unknown or unsuitable index, ...) is
  logged as an error and the connector goes on streaming: the table keeps its identity. Debezium
  does not roll back its JDBC transaction after that failure, so it cannot read the identity of the
  tables that come after and leaves them as they are too (recorded, scenario
  replica_identity_autoset_denied); so does this module, saying so in the log.

Differences, on purpose: names are quoted (Debezium writes them unquoted, so a table whose name
needs quotes fails there); the index name is folded to lower case first, as PostgreSQL folds the
unquoted name Debezium writes. Identities must be written in upper case: Debezium's pattern accepts
`full` but then fails to apply every entry of the property (Java's enum lookup), so lower case is
refused here at start-up.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg2
from psycopg2 import sql

from headwater.relational.table import TableId

log = logging.getLogger(__name__)

PROPERTY = "replica.identity.autoset.values"

# Debezium's ReplicaIdentityMapper.REPLICA_AUTO_SET_PATTERN, with Java's ASCII \s and \w
_ENTRY_RE = re.compile(
    r"\s*(?P<table>[^\s:]+):(?P<identity>DEFAULT|INDEX (?P<index>.\w*)|FULL|NOTHING)\s*",
    re.IGNORECASE | re.ASCII,
)
_FORMAT = "<schema>.<table regex>:<DEFAULT|FULL|NOTHING|INDEX index_name>"
_CODES = {"d": "DEFAULT", "f": "FULL", "n": "NOTHING", "i": "INDEX"}


@dataclass(frozen=True)
class IdentityRule:
    """One entry of the property."""

    entry: str
    pattern: re.Pattern[str]
    identity: str            # DEFAULT, FULL, NOTHING or INDEX
    index: str | None = None  # for INDEX: the index name as PostgreSQL resolves it

    def describe(self) -> str:
        return f"USING INDEX {self.index}" if self.identity == "INDEX" else self.identity

    def clause(self) -> sql.Composable:
        if self.identity == "INDEX":
            return sql.SQL("USING INDEX {}").format(sql.Identifier(self.index or ""))
        return sql.SQL(self.identity)


def _entries(value: str) -> list[str]:
    """Split on ',' as Java's String.split does: trailing empty entries are dropped."""
    parts = value.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts or [""]


def _fold(name: str) -> str:
    """PostgreSQL's folding of an unquoted identifier (ASCII letters to lower case)."""
    return "".join(ch.lower() if "A" <= ch <= "Z" else ch for ch in name)


def parse_autoset(value: str | None) -> list[IdentityRule]:
    """The entries of `replica.identity.autoset.values`; ValueError naming the first bad entry."""
    if value is None:
        return []
    rules = []
    for entry in _entries(value):
        m = _ENTRY_RE.fullmatch(entry)
        if m is None:
            raise ValueError(f"entry '{entry.strip()}' is not {_FORMAT} (entries are separated by ',', "
                             "one space between INDEX and the index name)")
        identity = m.group("identity").split(" ", 1)[0]
        if identity != identity.upper():
            raise ValueError(f"entry '{entry.strip()}': write the identity in upper case ({identity.upper()}); "
                             "Debezium 3.6.3 accepts lower case but then applies none of the entries")
        try:
            pattern = re.compile(m.group("table"), re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"entry '{entry.strip()}': the table regex is invalid ({exc})") from None
        index = m.group("index")
        # Debezium's `.\w*` lets the name start with a space ("INDEX  idx"), which its unquoted SQL ignores
        index = _fold(index.strip()) if index is not None else None
        rules.append(IdentityRule(entry.strip(), pattern, identity, index))
    return rules


def _current(cur: Any, table: TableId) -> str | None:
    """The table's identity, as IdentityRule.describe() writes it; None when the table is gone."""
    cur.execute(
        "SELECT c.relreplident, (SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = c.oid AND x.indisreplident LIMIT 1) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (table.schema, table.table))
    row = cur.fetchone()
    if row is None:
        return None
    code = row[0] if isinstance(row[0], str) else bytes(row[0]).decode()
    identity = _CODES.get(code, "UNKNOWN")
    return f"USING INDEX {row[1]}" if identity == "INDEX" else identity


def _owner_and_user(cur: Any, table: TableId) -> tuple[str, str]:
    cur.execute(
        "SELECT pg_get_userbyid(c.relowner), current_user FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s", (table.schema, table.table))
    row = cur.fetchone()
    return (row[0], row[1]) if row else ("?", "?")


def apply_autoset(conn: Any, value: str | None, tables: Iterable[TableId]) -> list[str]:
    """Apply `replica.identity.autoset.values` to the captured `tables` over `conn` (an ordinary
    connection). Returns the statements that were executed successfully. Failures are logged per
    table and do not stop the connector (as Debezium)."""
    rules = parse_autoset(value)
    if not rules:
        return []
    done: list[str] = []
    used: set[str] = set()
    failed_on: str | None = None   # the table whose ALTER failed: later tables are left alone
    left: list[str] = []
    for table in sorted(tables, key=lambda t: t.identifier()):
        name = table.identifier()
        matching = [r for r in rules if r.pattern.fullmatch(name)]
        used.update(r.entry for r in matching)
        if not matching:
            continue
        if len(matching) > 1:
            log.error("%s: %d entries match table %s (%s); its replica identity is left as it is",
                      PROPERTY, len(matching), name, ", ".join(repr(r.entry) for r in matching))
            continue
        rule = matching[0]
        if failed_on is not None:
            left.append(name)
            continue
        statement = sql.SQL("ALTER TABLE {}.{} REPLICA IDENTITY {}").format(
            sql.Identifier(table.schema or "public"), sql.Identifier(table.table), rule.clause())
        text = statement.as_string(conn)
        current: str | None = None
        try:
            with conn.cursor() as cur:
                current = _current(cur, table)
                if current == rule.describe():
                    log.info("replica identity of table %s is already %s", name, current)
                    continue
                cur.execute(statement)
            if not conn.autocommit:
                conn.commit()
        except psycopg2.Error as exc:
            if not conn.autocommit:
                conn.rollback()
            log.error("%s", _failure(conn, table, text, current, exc))
            failed_on = name
            continue
        done.append(text)
        log.info("replica identity of table %s set to %s (was %s)", name, rule.describe(), current)
    if left:
        log.error("%s: the replica identity of %s is left as it is: after the failed ALTER TABLE on %s, "
                  "Debezium 3.6.3 changes no further table (its transaction stays aborted)",
                  PROPERTY, ", ".join(left), failed_on)
    for rule in rules:
        if rule.entry not in used:
            log.warning("%s entry '%s' matches no captured table", PROPERTY, rule.entry)
    return done


def _failure(conn: Any, table: TableId, statement: str, current: str | None, exc: psycopg2.Error) -> str:
    """One line: which table, which statement, why; never a password."""
    keeps = f"; the table keeps REPLICA IDENTITY {current}" if current else ""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if getattr(exc, "pgcode", None) == "42501":  # insufficient_privilege
        try:
            with conn.cursor() as cur:
                owner, user = _owner_and_user(cur, table)
        except psycopg2.Error:
            owner, user = "?", "?"
        return (f"{PROPERTY}: could not set the replica identity of table {table.identifier()}: '{statement}' "
                f"needs ownership of the table (or membership in its owner role {owner!r}), which user {user!r} "
                f"lacks ({reason}){keeps}")
    return f"{PROPERTY}: could not set the replica identity of table {table.identifier()}: '{statement}' failed: " \
           f"{reason}{keeps}"
