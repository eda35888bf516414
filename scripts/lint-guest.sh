#!/usr/bin/env bash
# The python that runs inside sandboxes (src/**/*.py: task harness, code-interpreter kernels, waiting
# interpreter; src/util/guest-program.ts) checked by pyflakes, under the python the project runs
# (/usr/bin/python3: the one on PATH may be a pyenv shim without Debian's packages), and the Go
# sandbox agent (src/sandboxes/agent/) by gofmt (nothing to reformat) and go vet (its tests too;
# they run with the unit tests: test/unit/guest-code/sandbox-agent-go.test.ts). `npm run lint`
# runs it; eslint checks the node side (src/**/*.cjs). Usage: bash scripts/lint-guest.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c 'import pyflakes' 2>/dev/null; then
  echo "lint-guest: pyflakes is missing: apt-get install python3-pyflakes (scripts/setup-host.sh)" >&2
  exit 1
fi
mapfile -t files < <(find src test/fixtures/ports -name '*.py' | sort)
/usr/bin/python3 -m pyflakes "${files[@]}"

if ! command -v go >/dev/null 2>&1; then
  echo "lint-guest: go is missing: scripts/setup-host.sh installs golang-go" >&2
  exit 1
fi
unformatted=$(gofmt -l src/sandboxes/agent)
if [ -n "$unformatted" ]; then
  echo "lint-guest: not gofmt'ed (gofmt -w them):" >&2
  echo "$unformatted" >&2
  exit 1
fi
bash scripts/go-agent.sh vet ./...
