#!/usr/bin/env bash
# Runs the tests with node's own test runner (TypeScript through tsx), in two sets:
#   test/unit/         pure logic, no process spawned: seconds, all files in one process (test/unit-set.ts)
#   test/integration/  real sandboxes, CLIs, servers and interpreters (needs `npm run build`)
#
# AGENT_RUNNER_TEST_KINDS=local_process (npm run test:fast) leaves the gVisor and microVM matrix
# out, reported as skipped, for the edit loop; `npm test` runs every kind the host has.
#
#   scripts/run-tests.sh              unit, then integration
#   scripts/run-tests.sh unit         only the unit tests
#   scripts/run-tests.sh integration  only the integration tests
#
# Both sets run even when the unit tests fail, so one run shows every failure; the script
# then exits non-zero. Node 20's --test does not expand globs itself, hence the shell's globstar.
set -euo pipefail
shopt -s globstar nullglob
cd "$(dirname "$0")/.."

case "${1:-all}" in
  all) sets=(unit integration) ;;
  unit | integration) sets=("$1") ;;
  *)
    echo "usage: $0 [unit|integration]" >&2
    exit 2
    ;;
esac

failed=()
for set in "${sets[@]}"; do
  files=(test/"$set"/**/*.test.ts)
  # Unit tests spawn nothing and share no state: one process imports them all, instead of one
  # node + tsx start per file (about 14 s instead of 44 s on 2 cores).
  run=("${files[@]}")
  [ "$set" = unit ] && run=(test/unit-set.ts)
  if [ ${#files[@]} -eq 0 ]; then
    echo "no test files under test/$set" >&2
    failed+=("$set")
    continue
  fi
  if [ ${#failed[@]} -gt 0 ]; then
    echo "# the ${failed[*]} tests failed (above); running the $set tests anyway" >&2
  fi
  echo "# $set tests: ${#files[@]} files under test/$set"
  # Two integration files at a time (AGENT_RUNNER_TEST_CONCURRENCY; each file's leftover checks
  # look at its own process only): on 2 cores about 12 minutes where one at a time took 18. Three
  # took 11, but with both cores 97% busy a microVM under emulation then starved past a job's
  # timeout in one of two fresh-clone runs.
  concurrency=$([ "$set" = integration ] && echo "${AGENT_RUNNER_TEST_CONCURRENCY:-2}" || echo 1)
  # No stuck test may hang the run. --test-timeout bounds each file as a whole (node's runner
  # fails a file past it, naming it, kills it and goes on) and each test without a timeout of its
  # own. A process a killed file left behind can still hold the runner's pipe open after its
  # summary is printed: the file-times reporter ends the runner shortly after the summary, and
  # the set as a whole runs under timeout(1) too.
  file_deadline_ms=$((${AGENT_RUNNER_TEST_FILE_MINUTES:-5} * 60000))
  set_minutes=$([ "$set" = integration ] && echo "${AGENT_RUNNER_TEST_SET_MINUTES:-75}" || echo 15)
  set_deadline_s=$((set_minutes * 60))
  timeout --kill-after=30 "$set_deadline_s" \
    node --import tsx --test --test-concurrency="$concurrency" --test-timeout="$file_deadline_ms" \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=./scripts/file-times-reporter.mjs --test-reporter-destination=stdout \
    "${run[@]}" &
  # timeout(1) leads a process group of its own; whatever a killed file left in it goes with the set.
  group=$!
  wait "$group" || failed+=("$set")
  pkill -KILL -g "$group" 2>/dev/null || true
done

[ ${#failed[@]} -eq 0 ]
