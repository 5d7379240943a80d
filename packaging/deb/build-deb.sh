#!/bin/sh
# `make deb`: scopefs_VERSION_amd64.deb from a built binary, with dpkg-deb
# (no Debian source tree: the Makefile is the build system).
#   packaging/deb/build-deb.sh BINARY GENERATED_DIR OUTPUT_DIR
# The files are those of `make install` (packaging/install.sh: the C client
# library, the Python client and plugin, the examples included) in Debian's
# layout, plus Debian's copyright, changelog, shlibs and ldconfig trigger.
set -eu
[ $# -eq 3 ] || { echo "usage: packaging/deb/build-deb.sh BINARY GENERATED_DIR OUTPUT_DIR" >&2; exit 64; }
binary=$1; generated=$2; output=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=$(sed -n 's/.*static let package = "\(.*\)".*/\1/p' "$repo/Sources/ScopeFSCLI/Version.swift")
multiarch=x86_64-linux-gnu
stage=$(mktemp -d "${TMPDIR:-/tmp}/scopefs-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/scopefs_${version}_amd64

DESTDIR=$root PREFIX=/usr SBINDIR=/sbin ZSHCOMPDIR=/usr/share/zsh/vendor-completions \
SYSTEMDSYSTEMDIR=/lib/systemd/system SYSTEMDUSERDIR=/usr/lib/systemd/user RUNTIMEDIR=/usr/lib/scopefs \
LIBDIR=/usr/lib/$multiarch PYTHONDIR=/usr/lib/python3/dist-packages CBUILD="$stage/c" \
STRIP=1 "$repo/packaging/install.sh" "$binary" "$generated"

doc=$root/usr/share/doc/scopefs
install -m 0644 "$here/copyright" "$doc/copyright"
gzip -9n < "$doc/CHANGELOG.md" > "$doc/changelog.gz" && rm "$doc/CHANGELOG.md"
printf '%s\n' "scopefs ($version) unstable; urgency=medium" '' \
  "  * Built from the project's Makefile; see changelog.gz (CHANGELOG.md)." '' \
  " -- ScopeFS maintainers <maintainers@users.noreply.a-seed-45e6cf0b.example>  $(date -R -d @"${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}")" \
  | gzip -9n > "$doc/changelog.Debian.gz"
install -d "$root/usr/share/lintian/overrides"
install -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/scopefs"

install -d "$root/DEBIAN"
sed -e "s/@VERSION@/$version/" -e "s/@INSTALLED_SIZE@/$(du -sk --exclude=DEBIAN "$root" | cut -f1)/" \
  "$here/control.in" > "$root/DEBIAN/control"
echo "libscopefs 0 scopefs (>= $version)" > "$root/DEBIAN/shlibs"
echo "activate-noawait ldconfig" > "$root/DEBIAN/triggers"
# postinst: the account root's apps run as (packaging/app-account.sh).
{ printf '#!/bin/sh\nset -e\nif [ "$1" = configure ]; then\n'; sed -n '/^name=/,$p' "$repo/packaging/app-account.sh"; printf 'fi\n'; } \
  > "$root/DEBIAN/postinst"
chmod 0755 "$root/DEBIAN/postinst"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print0 | sort -z | xargs -0 md5sum | sed 's| \./| |') \
  > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/shlibs" "$root/DEBIAN/triggers" "$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 0755 {} +

mkdir -p "$output"
dpkg-deb --root-owner-group -Zxz --build "$root" "$output/scopefs_${version}_amd64.deb" >/dev/null
echo "$output/scopefs_${version}_amd64.deb"
