#!/bin/sh
# Installs a built scopefs and what goes with it: `make install` (under
# /usr/local) and `make deb` (a Debian layout in a staging root) both call
# this, so the two install the same files: the binary (stripped unless
# STRIP=0), the mount helper, the systemd units, the man pages, the shell
# completions, the documentation with the examples, the C client library
# with its header and pkg-config file (built by clients/c's Makefile), and
# the Python client with its pytest plugin and the metadata that makes
# pytest load the plugin by itself.
#   packaging/install.sh BINARY GENERATED_DIR
# GENERATED_DIR holds man/*.1 and completions/scopefs.{bash,zsh,fish}
# (`make generated`). Layout variables (defaults for /usr/local):
#   DESTDIR PREFIX BINDIR SBINDIR MANDIR DOCDIR EXAMPLESDIR BASHCOMPDIR
#   ZSHCOMPDIR FISHCOMPDIR SYSTEMDSYSTEMDIR SYSTEMDUSERDIR RUNTIMEDIR PORTALDIR DBUSSERVICEDIR
#   LIBDIR INCLUDEDIR PYTHONDIR CBUILD STRIP=0|1
# PYTHONDIR defaults to the folder Debian's python3 reads for PREFIX
# (/usr/local/lib/python3.X/dist-packages); CBUILD is where the C library
# is built (default .build/clients-c, which git ignores).
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
# xdg-desktop-portal (1.16) reads backends' .portal files from its own
# data folder only (/usr/share/...) unless XDG_DESKTOP_PORTAL_DIR says
# otherwise; D-Bus finds services under every XDG_DATA_DIRS entry.
PORTALDIR=${PORTALDIR:-$PREFIX/share/xdg-desktop-portal/portals}
DBUSSERVICEDIR=${DBUSSERVICEDIR:-$PREFIX/share/dbus-1/services}
EXAMPLESDIR=${EXAMPLESDIR:-$DOCDIR/examples}
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=${INCLUDEDIR:-$PREFIX/include}
# The system's python3 (not a pyenv or venv one first on PATH): the client
# is for the programs the system runs.
system_python=/usr/bin/python3
[ -x "$system_python" ] || system_python=python3
PYTHONDIR=${PYTHONDIR:-$PREFIX/lib/python$("$system_python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages}
CBUILD=${CBUILD:-$repo/.build/clients-c}
# An installed binary is stripped: the release build's symbols and debug
# information are 44 of its 114 MB (70 MB stripped, most of it the static
# Foundation and ICU's data); STRIP=0 keeps them for a debugger.
STRIP=${STRIP:-1}
strip_elf() {
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$@"
}

for dir in "$BINDIR" "$SBINDIR" "$MANDIR/man1" "$MANDIR/man8" "$DOCDIR" "$BASHCOMPDIR" "$ZSHCOMPDIR" "$FISHCOMPDIR" \
           "$SYSTEMDSYSTEMDIR" "$SYSTEMDUSERDIR" "$PORTALDIR" "$DBUSSERVICEDIR"; do
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
  strip_elf "$DESTDIR$BINDIR/scopefs"
  [ ! -d "$DESTDIR$RUNTIMEDIR" ] || for lib in "$DESTDIR$RUNTIMEDIR"/*.so; do
    strip_elf "$lib"
  done
fi

# mount(8)'s helper, calling this binary unless SCOPEFS_BIN says otherwise.
sed "s|\${SCOPEFS_BIN:-scopefs}|\${SCOPEFS_BIN:-$BINDIR/scopefs}|" "$repo/mount-scripts/mount.scopefs" \
  > "$DESTDIR$SBINDIR/mount.scopefs"
chmod 0755 "$DESTDIR$SBINDIR/mount.scopefs"
# `mount -t fuse.scopefs` (the type findmnt shows) runs mount.fuse.scopefs.
ln -sf mount.scopefs "$DESTDIR$SBINDIR/mount.fuse.scopefs"

for unit in scopefs@.service:"$SYSTEMDSYSTEMDIR" scopefs.service:"$SYSTEMDUSERDIR" \
  scopefs-portal.service:"$SYSTEMDUSERDIR" scopefs-settings.service:"$SYSTEMDUSERDIR"; do
  sed -e "s|@BINDIR@|$BINDIR|g" -e "s|@DOCDIR@|$DOCDIR|g" "$repo/mount-scripts/systemd/${unit%%:*}" > "$DESTDIR${unit#*:}/${unit%%:*}"
  chmod 0644 "$DESTDIR${unit#*:}/${unit%%:*}"
done

# The FileChooser backend of `scopefs portal` (docs/PORTAL.md).
install -m 0644 "$repo/mount-scripts/portal/scopefs.portal" "$DESTDIR$PORTALDIR/scopefs.portal"
sed "s|@BINDIR@|$BINDIR|g" "$repo/mount-scripts/portal/org.freedesktop.impl.portal.desktop.scopefs.service" \
  > "$DESTDIR$DBUSSERVICEDIR/org.freedesktop.impl.portal.desktop.scopefs.service"
chmod 0644 "$DESTDIR$DBUSSERVICEDIR/org.freedesktop.impl.portal.desktop.scopefs.service"

# The pages name the documentation folder this install uses (issue 50:
# they said /usr/share/doc while `make install` uses /usr/local/share/doc).
for page in "$generated"/man/*.1; do
  sed "s|/usr/share/doc/scopefs|$DOCDIR|g" "$page" | gzip -9n > "$DESTDIR$MANDIR/man1/$(basename "$page").gz"
  chmod 0644 "$DESTDIR$MANDIR/man1/$(basename "$page").gz"
done
sed "s|/usr/share/doc/scopefs|$DOCDIR|g" "$repo/mount-scripts/mount.scopefs.8" | gzip -9n > "$DESTDIR$MANDIR/man8/mount.scopefs.8.gz"
chmod 0644 "$DESTDIR$MANDIR/man8/mount.scopefs.8.gz"
ln -sf mount.scopefs.8.gz "$DESTDIR$MANDIR/man8/mount.fuse.scopefs.8.gz"
# bash sources completion scripts: no #! line.
sed '1{/^#!/d}' "$generated/completions/scopefs.bash" > "$DESTDIR$BASHCOMPDIR/scopefs"
chmod 0644 "$DESTDIR$BASHCOMPDIR/scopefs"
install -m 0644 "$generated/completions/scopefs.zsh" "$DESTDIR$ZSHCOMPDIR/_scopefs"
install -m 0644 "$generated/completions/scopefs.fish" "$DESTDIR$FISHCOMPDIR/scopefs.fish"

# The documents and their images in one folder: the README's links to
# docs/X point beside it once installed.
install -m 0644 "$repo/CHANGELOG.md" "$repo"/docs/*.md "$repo"/docs/*.png "$DESTDIR$DOCDIR/"
sed 's|](docs/|](|g' "$repo/README.md" > "$DESTDIR$DOCDIR/README.md"
chmod 0644 "$DESTDIR$DOCDIR/README.md"
# The Swift client library, for the Swift examples to build against.
SWIFTCLIENTDIR=$PREFIX/share/scopefs/clients/swift
(cd "$repo/clients/swift" && find . \( -name .build -o -name '.build-*' -o -name .swiftpm \) -prune -o -type f -print) \
  | sort | while read -r file; do
  install -D -m 0644 "$repo/clients/swift/$file" "$DESTDIR$SWIFTCLIENTDIR/$file"
done
# The examples the documentation runs, without what building them left;
# a Swift example's package names the installed client.
(cd "$repo/docs/examples" && find . \( -name .build -o -name '.build-*' -o -name __pycache__ -o -name .pytest_cache \) -prune \
  -o -type f ! -name '*.pyc' -print) | sort | while read -r file; do
  install -D -m 0644 "$repo/docs/examples/$file" "$DESTDIR$EXAMPLESDIR/$file"
  case $file in
    */Package.swift) sed -i "s|\"../../../clients/swift\"|\"$SWIFTCLIENTDIR\"|" "$DESTDIR$EXAMPLESDIR/$file" ;;
  esac
done

# The C client library, its header and pkg-config file: clients/c's own
# install target, so what it builds is what is installed.
make -s -C "$repo/clients/c" BUILD="$CBUILD" PREFIX="$PREFIX" LIBDIR="$LIBDIR" INCLUDEDIR="$INCLUDEDIR" \
  DESTDIR="$DESTDIR" install >/dev/null
if [ "$STRIP" = 1 ]; then
  for lib in "$DESTDIR$LIBDIR"/libscopefs.so.*; do
    [ -L "$lib" ] || strip_elf "$lib"
  done
fi

# The Python client and its pytest plugin, with the metadata of
# clients/python/pyproject.toml (the plugin's pytest11 entry point).
install -d "$DESTDIR$PYTHONDIR"
install -m 0644 "$repo/clients/python/scopefs.py" "$repo/clients/python/scopefs_testing.py" "$DESTDIR$PYTHONDIR/"
"$system_python" "$repo/packaging/python-dist-info.py" "$repo/clients/python/pyproject.toml" "$DESTDIR$PYTHONDIR"

# The built-in provider extensions (`scopefs provider add --extension s3`,
# rclone, folder) and the Python SDK they run on, as the source tree lays
# them out: each script finds the SDK relative to itself, and the daemon
# finds them in PREFIX/share/scopefs (docs/PROVIDERS.md). The SDK also goes
# where python3 imports from, for extensions of one's own.
for file in extensions/s3/scopefs_s3.py extensions/rclone/scopefs_rclone.py docs/examples/extensions/folder.py; do
  install -D -m 0755 "$repo/$file" "$DESTDIR$PREFIX/share/scopefs/$file"
done
for file in extensions/requirements.txt clients/python/scopefs_extension.py; do
  install -D -m 0644 "$repo/$file" "$DESTDIR$PREFIX/share/scopefs/$file"
done
install -m 0644 "$repo/clients/python/scopefs_extension.py" "$DESTDIR$PYTHONDIR/"

# The account root's apps run as; a package makes it in its postinst.
[ -n "$DESTDIR" ] || "$repo/packaging/app-account.sh"
