#!/usr/bin/env bash
# The python that runs inside sandboxes (src/**/*.py: task harness, code-interpreter kernels, waiting
# interpreter; src/util/guest-program.ts) checked by pyflakes, under the python the project runs
# (/usr/bin/python3: the one on PATH may be a pyenv shim without Debian's packages). `npm run
# lint` runs it; eslint checks the node side (src/**/*.cjs). Usage: bash scripts/lint-guest.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c 'import pyflakes' 2>/dev/null; then
  echo "lint-guest: pyflakes is missing: apt-get install python3-pyflakes (scripts/setup-host.sh)" >&2
  exit 1
fi
mapfile -t files < <(find src -name '*.py' | sort)
/usr/bin/python3 -m pyflakes "${files[@]}"
