#!/usr/bin/env bash
# Builds the sandbox agent (src/sandboxes/agent/, Go, standard library only) into
# dist/sandboxes/sandbox-agent: one static program, so a sandbox needs no python, shell or C
# library of its image to run it. `npm run build` runs it. Go's build cache lives in
# node_modules/.cache/go-build (ignored, kept between builds), so a build with nothing changed
# takes well under a second. Usage: bash scripts/build-agent.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1; then
  echo "build-agent: go is missing: scripts/setup-host.sh installs golang-go" >&2
  exit 1
fi
# The repository's own caches (ignored), no module proxy (the agent has no dependency), no C
# (a static program), and the toolchain installed, never one downloaded.
export GOCACHE="$PWD/node_modules/.cache/go-build" GOPATH="$PWD/node_modules/.cache/go" \
  GOPROXY=off GOTOOLCHAIN=local GO111MODULE=on CGO_ENABLED=0
mkdir -p dist/sandboxes
(cd src/sandboxes/agent && go build -trimpath -ldflags='-s -w' -o ../../../dist/sandboxes/sandbox-agent.tmp .)
mv dist/sandboxes/sandbox-agent.tmp dist/sandboxes/sandbox-agent
