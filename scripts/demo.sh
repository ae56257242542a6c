#!/usr/bin/env bash
# The README's first command: set up this machine (idempotent), then run Headwater's main job on
# the embedded default (throwaway PostgreSQL with the sample inventory database, live capture).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/headwater demo "$@"
