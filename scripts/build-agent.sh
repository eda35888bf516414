#!/usr/bin/env bash
# Builds the sandbox agent (src/sandboxes/agent/, Go, standard library only) into
# dist/sandboxes/sandbox-agent: one static program, so a sandbox needs no python, shell or C
# library of its image to run it. `npm run build` runs it. Go runs as scripts/go-agent.sh sets it
# up (its build cache kept in node_modules/.cache/go-build, so a build with nothing changed takes
# well under a second). Usage: bash scripts/build-agent.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist/sandboxes
bash scripts/go-agent.sh build -trimpath -ldflags='-s -w' -o ../../../dist/sandboxes/sandbox-agent.tmp .
mv dist/sandboxes/sandbox-agent.tmp dist/sandboxes/sandbox-agent
