#!/usr/bin/env bash
# Builds the native helpers the sandbox runs inside jobs. Static, so a job's filesystem view
# needs none of the host's libraries for them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist/native
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "build-native: no C compiler ($cc): run scripts/setup-host.sh (or apt-get install gcc libc6-dev)" >&2
  exit 1
fi
"$cc" -static -O2 -Wall -Wextra -Werror -o dist/native/exec-guard.tmp native/exec-guard.c
mv dist/native/exec-guard.tmp dist/native/exec-guard
"$cc" -static -O2 -Wall -Wextra -Werror -o dist/native/image-root.tmp native/image-root.c
mv dist/native/image-root.tmp dist/native/image-root
"$cc" -static -O2 -Wall -Wextra -Werror -o dist/native/seccomp-exec.tmp native/seccomp-exec.c
mv dist/native/seccomp-exec.tmp dist/native/seccomp-exec
