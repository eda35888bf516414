#!/usr/bin/env bash
# Runs a command in a session (and process group) of its own and passes SIGINT, SIGTERM and SIGHUP
# on to that whole group, so that a terminal's ^C or a signal to this script stops everything the
# command started: npm passes a signal to its script's sh alone, and sh does not pass it on.
# Exits with the command's status, or 143 when stopped by a signal.
#
#   scripts/own-session.sh COMMAND [ARG...]
set -uo pipefail
group=
interrupted=
trap 'interrupted=1; [ -z "$group" ] || kill -TERM -- "-$group" 2>/dev/null' TERM INT HUP
setsid "$@" &
group=$!
status=0
wait "$group" || status=$?
# A signal ends the wait at once: the command is still ending (what it started, swept).
while [ -n "$interrupted" ] && kill -0 "$group" 2>/dev/null; do wait "$group" || true; done
[ -z "$interrupted" ] || exit 143
exit "$status"
