#!/usr/bin/env bash
# `npm test` (through scripts/own-session.sh, so that a signal stops it whole): the build and its
# checks (scripts/build-and-check.sh), what the suite makes once per machine (test/prepare-suite.ts:
# the backends' first-use preparation, the Debian image), then the suite (scripts/run-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# The preparation needs the build, not its checks: it starts once the build is done, beside them.
bash scripts/build-and-check.sh node --import tsx test/prepare-suite.ts
bash scripts/run-tests.sh
