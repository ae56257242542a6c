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

echo "test: pytest -q $*"
rc=0
.venv/bin/pytest -q "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test: FAILED: pytest collected no tests (exit 5) — a wrong path or filter, or the tests are missing" >&2
fi
exit "$rc"
