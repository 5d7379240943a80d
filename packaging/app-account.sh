#!/bin/sh
# Creates the system account that root's apps run as (docs/SECURITY.md,
# "Who an app runs as"): `make deps`, `make install` and the Debian
# package's postinst run this. It does nothing when the account exists or
# when it is not run as root.
set -e
name=scopefs-app
[ "$(id -u)" = 0 ] || exit 0
getent passwd "$name" >/dev/null && exit 0
useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
  --comment "ScopeFS apps" "$name"
