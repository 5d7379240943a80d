#!/usr/bin/env bash
# `timed_line.sh NAME COMMAND...`: runs COMMAND and, when SCOPEFS_GROUP_TIMES
# names a file (tools/timed_groups.sh sets it), appends NAME's time and
# outcome there. The exit code is COMMAND's.
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
status=$?
if [ -n "${SCOPEFS_GROUP_TIMES:-}" ]; then
    printf '  %-30s %6ss  %s\n' "$name" "$(($(date +%s) - start))" \
        "$([ "$status" = 0 ] && echo passed || echo "FAILED ($status)")" >>"$SCOPEFS_GROUP_TIMES"
fi
exit "$status"
