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

say "What the app sees (SPEC S2): its container, and only the granted folder"
run "$scopefs" --state "$state" run --app "$app" -- find "$mnt" -maxdepth 6
say "The app reads its document"
run "$scopefs" --state "$state" run --app "$app" -- cat "$mnt/$app/Providers/local/Projects/Novel/chapter1.txt"
say "Private/ was never granted: invisible (ENOENT)"
run "$scopefs" --state "$state" run --app "$app" -- ls "$mnt/$app/Providers/local/Private" || true

say "Revoke while the app runs: the next read fails with EPERM (SPEC S14)"
run "$scopefs" --state "$state" revoke "$app" "$grant"
run "$scopefs" --state "$state" run --app "$app" -- cat "$mnt/$app/Providers/local/Projects/Novel/chapter1.txt" || true
say "Restore: the same path works again, no remount (SPEC S15)"
run "$scopefs" --state "$state" restore "$app" "$grant"
run "$scopefs" --state "$state" run --app "$app" -- cat "$mnt/$app/Providers/local/Projects/Novel/chapter1.txt"

say "The inspect view: your own shell browses read-only (SPEC S4)"
run ls -l "$mnt/$app/Providers/local/Projects/Novel"
run touch "$mnt/$app/Providers/local/Projects/Novel/new.txt" || true

say "The Files and Folders page (SPEC S16) and the daemon's status"
run "$scopefs" --state "$state" privacy "$app"
run "$scopefs" --state "$state" status

say "Unmount"
run "$scopefs" --state "$state" unmount "$mnt"
trap - EXIT
