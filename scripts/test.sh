#!/usr/bin/env bash
# `npm test`: the build and its checks (scripts/build-and-check.sh), then the suite
# (scripts/run-tests.sh). Each step runs in a session of its own, and a signal to this script
# (npm forwards SIGINT and SIGTERM to it; package.json execs it, so no sh stands between) stops
# the step running with everything it started, and the test.
set -uo pipefail
cd "$(dirname "$0")/.."

step=
interrupted=
trap 'interrupted=1; [ -z "$step" ] || kill -TERM -- "-$step" 2>/dev/null' TERM INT HUP

run_step() {
  setsid "$@" &
  step=$!
  local status=0
  wait "$step" || status=$?
  # Interrupted: the step is still ending (run-tests.sh ends what its run started): wait for it.
  while [ -n "$interrupted" ] && kill -0 "$step" 2>/dev/null; do wait "$step" || true; done
  step=
  [ -z "$interrupted" ] || exit 143
  return "$status"
}

run_step bash scripts/build-and-check.sh || exit 1
run_step bash scripts/run-tests.sh
