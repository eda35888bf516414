#!/usr/bin/env bash
# Runs every test file under test/ with node's own test runner (TypeScript through tsx).
# Node 20's --test does not expand globs itself, hence the shell's globstar.
set -euo pipefail
shopt -s globstar nullglob
cd "$(dirname "$0")/.."
files=(test/**/*.test.ts)
if [ ${#files[@]} -eq 0 ]; then echo "no test files found" >&2; exit 1; fi
exec node --import tsx --test --test-reporter=spec "${files[@]}"
