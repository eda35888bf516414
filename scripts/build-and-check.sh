#!/usr/bin/env bash
# What `npm test` does before it runs the tests, side by side: `npm run build`, the tests'
# type-check and `npm run lint`. None of the checks needs the build, and each of the three is
# mostly one single-threaded process, so on 2 cores together they take about 30 s where one after
# another took about 40. Each one's output is shown whole after it ends, so they never
# interleave; the script fails when any of them does.
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
for name in build 'type-check of the tests' 'npm run lint'; do
  if wait "${pids[$name]}"; then
    echo "# $name: passed"
  else
    echo "# $name: FAILED"
    failed=1
  fi
  cat "$out/$name"
done
[ $failed = 0 ]
