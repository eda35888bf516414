#!/usr/bin/env bash
# The checks that read the code without running it, side by side (each is one single-threaded
# process; on 2 cores together they take the time of the slower one): the tests' type-check and
# `npm run lint`. Each one's output is shown whole after it ends, so the two never interleave.
set -uo pipefail
cd "$(dirname "$0")/.."

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
npm run --silent typecheck:tests >"$out/typecheck" 2>&1 &
typecheck=$!
npm run --silent lint >"$out/lint" 2>&1 &
lint=$!

failed=0
wait "$typecheck" || failed=1
echo "# type-check of the tests: $([ $failed = 0 ] && echo passed || echo FAILED)"
cat "$out/typecheck"
lint_failed=0
wait "$lint" || lint_failed=1
echo "# npm run lint: $([ $lint_failed = 0 ] && echo passed || echo FAILED)"
cat "$out/lint"
[ $failed = 0 ] && [ $lint_failed = 0 ]
