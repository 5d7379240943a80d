#!/bin/sh
# Installs a built scopefs and what goes with it: `make install` (under
# /usr/local) and `make deb` (a Debian layout in a staging root) both call
# this, so the two install the same files.
#   packaging/install.sh BINARY GENERATED_DIR
# GENERATED_DIR holds man/*.1 and completions/scopefs.{bash,zsh,fish}
# (`make generated`). Layout variables (defaults for /usr/local):
#   DESTDIR PREFIX BINDIR SBINDIR MANDIR DOCDIR BASHCOMPDIR ZSHCOMPDIR
#   FISHCOMPDIR SYSTEMDSYSTEMDIR SYSTEMDUSERDIR RUNTIMEDIR STRIP=1
# The Swift runtime libraries the binary links (from the toolchain that
# built it) are copied to RUNTIMEDIR and the binary's run path points
# there, so the installed binary does not need the toolchain.
set -eu
[ $# -eq 2 ] || { echo "usage: packaging/install.sh BINARY GENERATED_DIR" >&2; exit 64; }
binary=$1; generated=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
BINDIR=${BINDIR:-$PREFIX/bin}
SBINDIR=${SBINDIR:-/sbin}
MANDIR=${MANDIR:-$PREFIX/share/man}
DOCDIR=${DOCDIR:-$PREFIX/share/doc/scopefs}
BASHCOMPDIR=${BASHCOMPDIR:-$PREFIX/share/bash-completion/completions}
ZSHCOMPDIR=${ZSHCOMPDIR:-$PREFIX/share/zsh/site-functions}
FISHCOMPDIR=${FISHCOMPDIR:-$PREFIX/share/fish/vendor_completions.d}
SYSTEMDSYSTEMDIR=${SYSTEMDSYSTEMDIR:-$PREFIX/lib/systemd/system}
SYSTEMDUSERDIR=${SYSTEMDUSERDIR:-$PREFIX/lib/systemd/user}
RUNTIMEDIR=${RUNTIMEDIR:-$PREFIX/lib/scopefs}
STRIP=${STRIP:-0}

for dir in "$BINDIR" "$SBINDIR" "$MANDIR/man1" "$MANDIR/man8" "$DOCDIR" "$BASHCOMPDIR" "$ZSHCOMPDIR" "$FISHCOMPDIR" \
           "$SYSTEMDSYSTEMDIR" "$SYSTEMDUSERDIR"; do
  install -d "$DESTDIR$dir"
done

# The binary, and the Swift runtime it links (none with --static-swift-stdlib).
install -m 0755 "$binary" "$DESTDIR$BINDIR/scopefs"
core=$(ldd "$binary" | awk '$1 == "libswiftCore.so" { print $3 }')
if [ -n "$core" ]; then
  toolchain_libs=$(dirname "$core")
  install -d "$DESTDIR$RUNTIMEDIR"
  ldd "$binary" | awk -v dir="$toolchain_libs/" 'index($3, dir) == 1 { print $3 }' | while read -r lib; do
    # The toolchain's libraries find each other through their run path $ORIGIN.
    install -m 0644 "$lib" "$DESTDIR$RUNTIMEDIR/"
  done
  patchelf --set-rpath "$RUNTIMEDIR" "$DESTDIR$BINDIR/scopefs"
fi
if [ "$STRIP" = 1 ]; then
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$DESTDIR$BINDIR/scopefs"
  [ ! -d "$DESTDIR$RUNTIMEDIR" ] || for lib in "$DESTDIR$RUNTIMEDIR"/*.so; do
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$lib"
  done
fi

# mount(8)'s helper, calling this binary unless SCOPEFS_BIN says otherwise.
sed "s|\${SCOPEFS_BIN:-scopefs}|\${SCOPEFS_BIN:-$BINDIR/scopefs}|" "$repo/mount-scripts/mount.scopefs" \
  > "$DESTDIR$SBINDIR/mount.scopefs"
chmod 0755 "$DESTDIR$SBINDIR/mount.scopefs"
# `mount -t fuse.scopefs` (the type findmnt shows) runs mount.fuse.scopefs.
ln -sf mount.scopefs "$DESTDIR$SBINDIR/mount.fuse.scopefs"

for unit in scopefs@.service:"$SYSTEMDSYSTEMDIR" scopefs.service:"$SYSTEMDUSERDIR"; do
  sed -e "s|@BINDIR@|$BINDIR|g" -e "s|@DOCDIR@|$DOCDIR|g" "$repo/mount-scripts/systemd/${unit%%:*}" > "$DESTDIR${unit#*:}/${unit%%:*}"
  chmod 0644 "$DESTDIR${unit#*:}/${unit%%:*}"
done

for page in "$generated"/man/*.1; do
  gzip -9n < "$page" > "$DESTDIR$MANDIR/man1/$(basename "$page").gz"
  chmod 0644 "$DESTDIR$MANDIR/man1/$(basename "$page").gz"
done
gzip -9n < "$repo/mount-scripts/mount.scopefs.8" > "$DESTDIR$MANDIR/man8/mount.scopefs.8.gz"
chmod 0644 "$DESTDIR$MANDIR/man8/mount.scopefs.8.gz"
ln -sf mount.scopefs.8.gz "$DESTDIR$MANDIR/man8/mount.fuse.scopefs.8.gz"
# bash sources completion scripts: no #! line.
sed '1{/^#!/d}' "$generated/completions/scopefs.bash" > "$DESTDIR$BASHCOMPDIR/scopefs"
chmod 0644 "$DESTDIR$BASHCOMPDIR/scopefs"
install -m 0644 "$generated/completions/scopefs.zsh" "$DESTDIR$ZSHCOMPDIR/_scopefs"
install -m 0644 "$generated/completions/scopefs.fish" "$DESTDIR$FISHCOMPDIR/scopefs.fish"

install -m 0644 "$repo/README.md" "$repo/CHANGELOG.md" "$repo"/docs/*.md "$DESTDIR$DOCDIR/"

# The account root's apps run as; a package makes it in its postinst.
[ -n "$DESTDIR" ] || "$repo/packaging/app-account.sh"
