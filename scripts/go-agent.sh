#!/usr/bin/env bash
# Runs go on the sandbox agent (src/sandboxes/agent/, Go, standard library only) in the one
# environment its build, lint and tests share: the repository's own caches (ignored, kept between
# runs, so a build or test with nothing changed takes well under a second), no module proxy (the
# agent has no dependency), no C (a static program), and the toolchain installed, never one
# downloaded. scripts/build-agent.sh builds with it, scripts/lint-guest.sh vets with it, and
# test/unit/guest-code/sandbox-agent-go.test.ts runs the agent's Go tests with it.
# Usage: bash scripts/go-agent.sh GO-COMMAND [ARGS...]   (run in src/sandboxes/agent/)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1; then
  echo "go-agent: go is missing: scripts/setup-host.sh installs golang-go" >&2
  exit 1
fi
export GOCACHE="$PWD/node_modules/.cache/go-build" GOPATH="$PWD/node_modules/.cache/go" \
  GOPROXY=off GOTOOLCHAIN=local GO111MODULE=on CGO_ENABLED=0
cd src/sandboxes/agent
exec go "$@"
