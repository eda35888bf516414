#!/usr/bin/env bash
# Runs the tests with node's own test runner, as scripts/build-tests.mjs builds them into
# .test-build/run-PID/ (plain JavaScript; a single file still runs from source with
# `node --import tsx --test test/<path>.test.ts`), in two sets:
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
# Both sets run even when a unit test fails, so one run shows every failure; the script then
# exits non-zero. Node 20's --test does not expand globs itself, hence the shell's globstar.
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

# scripts/run-test-files.mjs starts files in the order given (`node --test` sorts them by name).
# The heavy files boot microVMs by the dozen (under TCG, software emulation, each VM keeps a core
# busy): they run one at a time, each once it holds the machine's heavy slot
# (scripts/machine-slots.mjs, shared with any other run of the suite on this machine), beside the
# others. Of the others, the slowest (by the per-file times each run prints at its end) go first,
# so that the run ends on short files, not on one long file that the other slots wait for. A name
# in either list that no longer exists fails the run.
HEAVY=(
  test/integration/security/attacks-microvm.test.ts
  test/integration/e2b/pause-fork.test.ts
  test/integration/snippet/conformance.test.ts
  test/integration/isolation/microvm.test.ts
)
SLOWEST=(
  test/integration/http/sessions.test.ts
  test/integration/sandboxes/process-deaths.test.ts
  test/integration/distributed/first-use.test.ts
  test/integration/cli/prepare.test.ts
  test/integration/security/cli-cleanup.test.ts
  test/integration/security/attacks-gvisor.test.ts
  test/integration/security/attacks-local-process.test.ts
  test/integration/distributed/cluster.test.ts
  test/integration/e2b/code-interpreter.test.ts
  test/integration/e2b/sdk.test.ts
  test/integration/sandboxes/faces.test.ts
  test/integration/http/first-start.test.ts
  test/integration/security/slow-clients.test.ts
  test/integration/cli/backends.test.ts
)

existing() {
  local file
  for file in "$@"; do
    [ -f "$file" ] || {
      echo "scripts/run-tests.sh: $file is listed as heavy or slow but does not exist" >&2
      return 1
    }
    echo "$file"
  done
}

# The files of a set but the heavy ones, the slowest first.
light_files() {
  local file
  existing "${SLOWEST[@]}"
  for file in "$@"; do
    [[ " ${SLOWEST[*]} ${HEAVY[*]} " == *" $file "* ]] || echo "$file"
  done
}

# The tests are built into a directory of this run's own, so that a run beside it in the same
# checkout (`npm run test:unit` during the suite) does not remove the files it has yet to start.
build=.test-build/run-$$
trap 'rm -rf "$build"' EXIT
# A test file as scripts/build-tests.mjs built it: test/a/b.test.ts is $build/a/b.test.js.
built() {
  local file
  for file in "$@"; do
    file=${file#test/}
    echo "$build/${file%.ts}.js"
  done
}
node scripts/build-tests.mjs "$build"

run=()
heavy=()
for set in "${sets[@]}"; do
  files=(test/"$set"/**/*.test.ts)
  if [ ${#files[@]} -eq 0 ]; then
    echo "no test files under test/$set" >&2
    exit 1
  fi
  echo "# $set tests: ${#files[@]} files under test/$set"
  case "$set" in
    # Unit tests spawn nothing and share no state: one process imports them all, instead of one
    # node start per file (about 14 s instead of 44 s on 2 cores, through tsx).
    unit) run+=(test/unit-set.ts) ;;
    integration)
      run+=($(light_files "${files[@]}"))
      heavy+=($(existing "${HEAVY[@]}"))
      ;;
  esac
done

# Both sets are one run of the runner, one summary: the unit set is one more file, first, beside
# the slowest integration files (alone, one process on one core, it kept the other core idle for
# its 20 s). Three files at a time (AGENT_RUNNER_TEST_CONCURRENCY), one of them heavy: on 2 cores
# the integration set took 10.4 minutes two at a time, 7.9 three at a time, with both cores about
# 95% busy. Most files wait more than they compute (services starting, timeouts); three heavy
# files at once, though, overran the microVMs' own deadlines.
concurrency=$([ "${sets[*]}" = unit ] && echo 1 || echo "${AGENT_RUNNER_TEST_CONCURRENCY:-3}")
# No stuck test may hang the run. The file deadline bounds each file as a whole (the runner fails
# a file past it, naming it, kills it and goes on). A process a killed file left behind can still
# hold the runner's pipe open after its summary is printed: the file-times reporter ends the runner
# shortly after the summary, and the run as a whole runs under timeout(1) too.
file_deadline_ms=$((${AGENT_RUNNER_TEST_FILE_MINUTES:-5} * 60000))
# A machine's extra CA bundle (this one sets NODE_EXTRA_CA_CERTS to the system's, 220 KB) is
# parsed by every node process at its start, about 40 ms of CPU each: some 700 a run, about 25
# core-seconds. None of ours speaks TLS past this host; npm, which may reach the registry
# (test/integration/agent-exec/packaged.test.ts), gets it back.
export AGENT_RUNNER_TEST_NPM_CA_CERTS="${NODE_EXTRA_CA_CERTS:-}"
unset NODE_EXTRA_CA_CERTS
run_minutes=$([ "${sets[*]}" = unit ] && echo 15 || echo "${AGENT_RUNNER_TEST_SET_MINUTES:-75}")
# Every process of this run carries this in its environment (and each file's, its own
# AGENT_RUNNER_TEST_OWNER: scripts/test-process-owner.mjs), so that what outlives a file, or the
# run, is found and ended by scripts/test-processes.mjs, and another run beside this one is not.
export AGENT_RUNNER_TEST_RUN="$$-$RANDOM$RANDOM"
timeout --kill-after=30 $((run_minutes * 60)) \
  node --enable-source-maps --import ./scripts/test-process-owner.mjs \
  scripts/run-test-files.mjs "$concurrency" "$file_deadline_ms" $(built "${run[@]}") --heavy $(built "${heavy[@]}") &
# timeout(1) leads a process group of its own; whatever a killed file left in it goes with the run.
group=$!
# A terminal's ^C reaches this script's process group, not timeout's, and a signal to `npm test`
# reaches this script alone: either way the run is stopped whole.
interrupted=
trap 'interrupted=1; kill -TERM -- "-$group" 2>/dev/null' TERM INT HUP
status=0
wait "$group" || status=$?
if [ -n "$interrupted" ]; then
  for _ in $(seq 20); do
    pgrep -g "$group" >/dev/null || break
    sleep 0.5
  done
fi
pkill -KILL -g "$group" 2>/dev/null || true
# What left the group (a service started in a session of its own) but not the run.
node scripts/test-processes.mjs sweep || [ "$status" != 0 ] || status=1
[ -z "$interrupted" ] || status=143
exit "$status"
