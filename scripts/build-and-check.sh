#!/usr/bin/env bash
# What `npm test` does before it runs the tests, side by side: `npm run build`, the tests'
# type-check and `npm run lint`. None of the checks needs the build, and each of the three is
# mostly one single-threaded process, so on 2 cores together they take about 30 s where one after
# another took about 40. Each one's output is shown whole after it ends, so they never
# interleave; the script fails when any of them does.
#
#   scripts/build-and-check.sh [COMMAND...]
#
# COMMAND, when given, runs once the build has passed, beside the checks still running (for
# `npm test`: the backends' preparation, which needs the build, not the checks: about 20 s less
# than one after the other on 2 cores). It is not run when the build failed.
set -uo pipefail
cd "$(dirname "$0")/.."

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A steps=([build]='npm run --silent build' [type-check of the tests]='npm run --silent typecheck:tests' [npm run lint]='npm run --silent lint')
declare -A pids
for name in "${!steps[@]}"; do
  ${steps[$name]} >"$out/$name" 2>&1 &
  pids[$name]=$!
done

failed=0
then_pid=
for name in build 'type-check of the tests' 'npm run lint'; do
  if wait "${pids[$name]}"; then
    echo "# $name: passed"
    if [ "$name" = build ] && [ $# -gt 0 ]; then
      "$@" >"$out/then" 2>&1 &
      then_pid=$!
    fi
  else
    echo "# $name: FAILED"
    failed=1
  fi
  cat "$out/$name"
done
if [ -n "$then_pid" ]; then
  if wait "$then_pid"; then echo "# $*: passed"; else
    echo "# $*: FAILED"
    failed=1
  fi
  cat "$out/then"
elif [ $# -gt 0 ]; then
  echo "# $*: not run (the build failed)"
fi
[ $failed = 0 ]
