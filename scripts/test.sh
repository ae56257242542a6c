#!/usr/bin/env bash
# The test command: set up (idempotent), lint, then pytest. Arguments go to pytest,
# e.g. `bash scripts/test.sh tests/embedded -x`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

lint_dirs=()
for d in src tests bench; do
  [ -d "$d" ] && lint_dirs+=("$d")
done
echo "test: ruff check ${lint_dirs[*]}"
.venv/bin/ruff check "${lint_dirs[@]}"

# two worker processes (pytest-xdist), each test file on one of them: most tests wait on
# PostgreSQL, Spark or Kafka rather than compute, so the suite takes about half the time. Every
# fixture starts its servers on free ports and works in its own temporary directory. Files go to
# the workers in collection order, which tests/conftest.py starts with the longest files
# (xdist's default reorder would put files with few tests, the longest ones among them, last).
# HEADWATER_TEST_WORKERS=0 runs everything in one process.
# --durations: the slowest tests at the end of the log, to keep the suite's time in view.
workers="${HEADWATER_TEST_WORKERS:-2}"
echo "test: pytest -q -n $workers --dist loadfile --no-loadscope-reorder --durations=25 $*"
rc=0
.venv/bin/pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder --durations=25 "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test: FAILED: pytest collected no tests (exit 5) — a wrong path or filter, or the tests are missing" >&2
fi
exit "$rc"
