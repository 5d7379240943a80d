#!/usr/bin/env bash
# Runs `make GROUP` for each group named, in order, and prints how long
# each took at the end, pass or fail (issue 51: CI's minutes per group,
# so the next slow group is named, not guessed). Stops at the first group
# that fails, as make would, and exits with its code.
#
# The groups that run side by side inside one target (the integration
# suites on SQLite and PostgreSQL) add their own lines through
# tools/timed_line.sh, to the file named by SCOPEFS_GROUP_TIMES.
set -uo pipefail
make=${MAKE:-make}
export SCOPEFS_GROUP_TIMES=${SCOPEFS_GROUP_TIMES:-$(mktemp /tmp/scopefs-group-times.XXXXXX)}
: >"$SCOPEFS_GROUP_TIMES"
status=0
for group in "$@"; do
    start=$(date +%s)
    "$make" --no-print-directory "$group"
    status=$?
    printf '%-32s %6ss  %s\n' "$group" "$(($(date +%s) - start))" \
        "$([ "$status" = 0 ] && echo passed || echo "FAILED ($status)")" >>"$SCOPEFS_GROUP_TIMES"
    [ "$status" = 0 ] || break
done
echo
echo "== time per group =="
cat "$SCOPEFS_GROUP_TIMES"
rm -f "$SCOPEFS_GROUP_TIMES"
exit "$status"
