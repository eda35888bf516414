#!/usr/bin/env bash
# The README's test line as a new machine runs it, timed: the figure docs/operations.md reports.
#
#   scripts/fresh-machine-check.sh [--runs N] [--beside]
#
# Before each run it wipes what the project writes outside a clone (below), then clones this
# checkout's HEAD into a new directory and runs .ci/run there with an npm cache of its own, empty.
# --runs N does that N times in a row (default 1); --beside starts a second `npm test`, in a clone
# of its own, at the same time as the first run (two runs of the suite on one machine must not fail
# each other). One line per run says its exit status and minutes; the script fails if any run did.
# The system packages (scripts/setup-host.sh) stay: a new machine gets them from the same line.
#
# What is wiped, each only when no process uses it (never under a running suite or service):
#   $TMPDIR/agent-runner-test-state   the suite's state dir: microVM images and snapshots,
#                                     compile caches, runtime dirs (test/helpers/runtime.ts)
#   /var/lib/agent-runner             the service's state dir as root (`agent-runner serve`)
# Mounts a killed process left under them are unmounted first, and the removal never crosses into
# another file system.
set -euo pipefail
checkout=$(cd "$(dirname "$0")/.." && pwd)
tmp=${TMPDIR:-/tmp}
runs=1
beside=
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2 && shift 2 ;;
    --beside) beside=1 && shift ;;
    *) echo "usage: $0 [--runs N] [--beside]" >&2 && exit 2 ;;
  esac
done

WIPED=("$tmp/agent-runner-test-state" /var/lib/agent-runner)

# Pids of processes with a file, cwd or mapping under $1, or a suite's run marker in their environment.
users_of() {
  local dir=$1 pid
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    [ "$pid" != $$ ] || continue
    if tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -q '^AGENT_RUNNER_TEST_RUN=' ||
      ls -l "/proc/$pid/cwd" "/proc/$pid/fd" 2>/dev/null | grep -qF -- "$dir/" ||
      grep -qF -- "$dir/" "/proc/$pid/maps" 2>/dev/null; then
      echo "$pid"
    fi
  done
}

wipe() {
  local dir users
  for dir in "${WIPED[@]}"; do
    [ -e "$dir" ] || continue
    users=$(users_of "$dir" | tr '\n' ' ')
    if [ -n "$users" ]; then
      echo "fresh-machine-check: $dir is in use (pids $users): stop what runs there first" >&2
      exit 1
    fi
    # Deepest first; lazily, as a mount a dead process left may still be busy for a moment.
    # (grep finds none most times: that is no failure of the pipeline.)
    findmnt -rn -o TARGET | { grep -F -- "$dir/" || true; } | sort -r | while read -r mount; do umount -l "$mount"; done
    rm -rf --one-file-system "$dir"
  done
}

# Clones HEAD into a new directory and prints its path.
fresh_clone() {
  local dir
  dir=$(mktemp -d "$tmp/fresh-machine-check.XXXXXX")
  # mktemp's mode is 0700: the sandboxes' uids must reach the clone's dist/ (bound into each one).
  chmod 755 "$dir"
  git clone -q "$checkout" "$dir/agent-runner"
  echo "$dir/agent-runner"
}

# Runs "$@" in clone $1 with an empty npm cache of its own; prints "STATUS SECONDS" when done.
timed_in() {
  local clone=$1 started status=0
  shift
  started=$(date +%s)
  (cd "$clone" && npm_config_cache="$clone/../npm-cache" "$@") >"$clone/../output.log" 2>&1 || status=$?
  echo "$status $(($(date +%s) - started))"
}

report() {
  local what=$1 status=$2 seconds=$3 log=$4
  printf 'fresh-machine-check: %s: exit %s in %d min %02d s (%s)\n' "$what" "$status" $((seconds / 60)) $((seconds % 60)) "$log"
}

failed=0
for run in $(seq "$runs"); do
  wipe
  clone=$(fresh_clone)
  if [ -n "$beside" ] && [ "$run" = 1 ]; then
    other=$(fresh_clone)
    (cd "$other" && npm ci --silent --cache "$other/../npm-cache") >/dev/null
    timed_in "$other" npm test >"$other/../result" &
    beside_pid=$!
  fi
  read -r status seconds < <(timed_in "$clone" bash .ci/run)
  report "run $run of $runs" "$status" "$seconds" "$clone/../output.log"
  [ "$status" = 0 ] || failed=1
  if [ -n "${beside_pid:-}" ]; then
    wait "$beside_pid"
    read -r status seconds <"$other/../result"
    report "npm test beside run 1" "$status" "$seconds" "$other/../output.log"
    [ "$status" = 0 ] || failed=1
    beside_pid=
  fi
done
exit "$failed"
