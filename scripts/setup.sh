#!/usr/bin/env bash
# Idempotent set-up of a Debian 12 machine for Headwater: system packages (PostgreSQL 15), the
# virtualenv .venv and an editable install of headwater[dev]. A second run changes nothing and
# takes a second or two. Works from any directory; runs apt-get as root (or through sudo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PG_MAJOR=15
VENV=.venv
STAMP="$VENV/.headwater-installed"

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else die "need root (or sudo) to run: $*"; fi
}

# --- system packages ----------------------------------------------------------------------------
apt_packages=()
[ -x "/usr/lib/postgresql/$PG_MAJOR/bin/initdb" ] || apt_packages+=("postgresql-$PG_MAJOR" postgresql-contrib)
# PostGIS: geometry/geography type tests (tests/conformance/extra/scenarios/types_postgis)
[ -f "/usr/share/postgresql/$PG_MAJOR/extension/postgis.control" ] || apt_packages+=("postgresql-$PG_MAJOR-postgis-3")
# Spark's JVM and Maven, which fetches Delta Lake, Spark's Kafka connector and a Kafka broker
command -v java >/dev/null 2>&1 || apt_packages+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || apt_packages+=(maven)
if [ "${#apt_packages[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${apt_packages[*]} and no apt-get: install them by hand"
  say "installing ${apt_packages[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
  [ -x "/usr/lib/postgresql/$PG_MAJOR/bin/initdb" ] || die "postgresql-$PG_MAJOR installed, but initdb is missing"
fi

# --- Python virtualenv --------------------------------------------------------------------------
py_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
if ! { [ -x "$VENV/bin/python" ] && py_ok "$VENV/bin/python"; }; then
  python=""
  for candidate in ${PYTHON:-} python3 python3.11 python3.12 python3.13; do
    if command -v "$candidate" >/dev/null 2>&1 && py_ok "$candidate"; then python=$candidate; break; fi
  done
  if [ -z "$python" ]; then
    found=$(python3 -V 2>&1 || echo "no python3")
    die "Headwater needs Python >= 3.11 (python3 is: $found). Install it, or set PYTHON=/path/to/python3.11"
  fi
  [ -e "$VENV" ] && { say "removing broken $VENV"; rm -rf "$VENV"; }
  say "creating $VENV with $python ($("$python" -V 2>&1))"
  "$python" -m venv "$VENV" || die "'$python -m venv' failed (on Debian: apt-get install python3-venv)"
  rm -f "$STAMP"
fi

# --- headwater[dev], editable; again whenever pyproject.toml changes -------------------------------
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
  say "installing headwater[dev] into $VENV (pip install -e '.[dev]')"
  PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q -e '.[dev]'
  touch "$STAMP"
fi

# --- JVM libraries from Maven Central (.jars/), again whenever a pom changes ----------------------
bash scripts/fetch_jars.sh

say "ready (PostgreSQL $("/usr/lib/postgresql/$PG_MAJOR/bin/postgres" -V | awk '{print $3}'), $("$VENV/bin/python" -V))"
