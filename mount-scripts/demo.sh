#!/usr/bin/env bash
# The main job, end to end: a provider, an app, a grant, an app process
# reading through the mount, revoke -> EPERM, restore -> works again.
# State lives in .demo/ of the repository (re-created on each run).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
scopefs=${SCOPEFS_BIN:-$here/.build/debug/scopefs}
demo=$here/.demo
state=$demo/state
mnt=$demo/mnt
app=com.example.editor

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

if grep -qs " $mnt " /proc/mounts; then "$scopefs" --state "$state" unmount "$mnt" || fusermount3 -uz "$mnt"; fi
if grep -qs " $mnt " /proc/mounts; then echo "demo: $mnt is still mounted; not removing $demo" >&2; exit 1; fi
rm -rf "$demo"
mkdir -p "$demo/provider/Projects/Novel" "$demo/provider/Private" "$mnt"
echo "Chapter 1. It was a dark and stormy night." > "$demo/provider/Projects/Novel/chapter1.txt"
echo "bank statements" > "$demo/provider/Private/statements.txt"
trap '"$scopefs" --state "$state" unmount "$mnt" 2>/dev/null || true' EXIT

say "Set up: a provider, an app, a folder grant"
run "$scopefs" --state "$state" init
run "$scopefs" --state "$state" provider add local "$demo/provider" --name "On My Laptop"
run "$scopefs" --state "$state" app add "$app" --name "Editor"
grant=$("$scopefs" --state "$state" grant "$app" local:Projects/Novel)
echo "grant id: $grant"
run "$scopefs" --state "$state" mount "$mnt"

novel=$mnt/$app/Providers/local/Projects/Novel
chapter=$novel/chapter1.txt
# The app runs in the sandbox (SPEC S5): it sees its own view of the mount
# at the same path, the system's programs, and `scopefs` itself on PATH.
as_app() { "$scopefs" --state "$state" run --app "$app" -- "$@"; }

say "What the app sees (SPEC S2): its container, and only the granted folder (listed in scope)"
run as_app scopefs scope exec "$novel" -- find "$mnt" -maxdepth 6
say "Private/ was never granted: invisible (ENOENT)"
run as_app ls "$mnt/$app/Providers/local/Private" || true

say "Security scopes (SPEC S6-S9): no start, no access; start, read, stop"
run as_app cat "$chapter" || true
run as_app python3 -c "
import os
p = '$chapter'
print('start ->', os.getxattr(p, 'user.scopefs.start').decode())
print('read  ->', open(p).read().strip())
print('stop  ->', os.getxattr(p, 'user.scopefs.stop').decode())
try:
    open(p)
except PermissionError as e:
    print('read after the last stop ->', e.strerror)
"
say "scope exec: a shell tool in scope (SPEC S12)"
run as_app scopefs scope exec "$novel" -- cat "$chapter"

say "Revoke while the app runs: the next read fails with EPERM (SPEC S14)"
run "$scopefs" --state "$state" revoke "$app" "$grant"
run as_app scopefs scope exec "$novel" -- cat "$chapter" || true
say "Restore: the same path works again, no remount (SPEC S15)"
run "$scopefs" --state "$state" restore "$app" "$grant"
run as_app scopefs scope exec "$novel" -- cat "$chapter"

say "Open a file with the picker: a grant and a reference document (SPEC S17, S22-S23)"
run "$scopefs" --state "$state" open "$app" local:Projects/Novel/chapter1.txt
run ls -l "$mnt/$app/Container/Documents"
say "A bookmark, then the original is renamed on the host: the link follows (SPEC S23, S26)"
bookmark=$(as_app scopefs bookmark create "$mnt/$app/Container/Documents/chapter1.txt")
echo "bookmark: ${bookmark:0:48}..."
run mv "$demo/provider/Projects/Novel/chapter1.txt" "$demo/provider/Projects/Novel/Chapter One.txt"
sleep 1.5
run ls -l "$mnt/$app/Container/Documents"
run as_app scopefs bookmark resolve "$bookmark"

say "A leak: the app exits holding a scope (SPEC S11)"
run as_app python3 -c "import os; os.getxattr('$novel', 'user.scopefs.start'); print('exiting without stop')"
sleep 0.5

say "The sandbox (SPEC S5): the state directory, the provider's folder and your home do not exist in it"
run as_app ls "$state" "$demo/provider" "$HOME" || true
say "...and the isolation layer is the owner's: an app process cannot grant itself more (exit 77)"
run as_app scopefs grant "$app" local:Private || true

say "The inspect view: your own shell browses read-only (SPEC S4)"
run touch "$novel/new.txt" || true

say "The Files and Folders page (SPEC S16), the event log (S29) and status (S30)"
run "$scopefs" --state "$state" privacy "$app"
run "$scopefs" --state "$state" events --app "$app"
run "$scopefs" --state "$state" status

say "Unmount"
run "$scopefs" --state "$state" unmount "$mnt"
trap - EXIT
