#!/usr/bin/env bash
# `npm test` (through scripts/own-session.sh, so that a signal stops it whole): the build and its
# checks (scripts/build-and-check.sh), the backends' first-use preparation for the suite's state
# dir (`agent-runner prepare`: test/prepare-backends.ts), then the suite (scripts/run-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# The preparation needs the build, not its checks: it starts once the build is done, beside them.
bash scripts/build-and-check.sh node --import tsx test/prepare-backends.ts
bash scripts/run-tests.sh
