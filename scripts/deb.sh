#!/bin/sh
# Builds the Debian package from a staged tree (`make deb`; docs/packaging.md):
#   sh scripts/deb.sh BUILD_DIR VERSION
# writes BUILD_DIR/browserd_VERSION_ARCH.deb and prints its path. Needs the
# built BUILD_DIR/browserd and runtime-js/node_modules (scripts/deps.sh).
set -eu
build=$1
version=$2
arch=$(dpkg --print-architecture)
pkg=packaging/deb
stage=$build/deb/root
out=$build/browserd_${version}_${arch}.deb

[ -x "$build/browserd" ] || { echo "deb: $build/browserd is not built" >&2; exit 1; }
[ -f runtime-js/node_modules/.package-lock.json ] ||
    { echo "deb: runtime-js/node_modules is missing (run scripts/deps.sh)" >&2; exit 1; }

rm -rf "$build/deb"
mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/lib/browserd" "$stage/lib/systemd/system" \
    "$stage/etc/browserd" "$stage/usr/share/doc/browserd"

# The server (the crash watcher is the same binary, forked at start).
install -m 0755 "$build/browserd" "$stage/usr/bin/browserd"

# runtime-js with its packages: found by the server at ../lib/browserd/runtime-js
# from its executable (src/runtime/pwexec.c). Production packages only.
rt=$stage/usr/lib/browserd/runtime-js
mkdir -p "$rt"
cp runtime-js/*.mjs runtime-js/package.json runtime-js/package-lock.json "$rt/"
cp -a runtime-js/node_modules "$rt/"
(cd "$rt" && npm prune --omit=dev --offline --no-audit --no-fund --loglevel=error >/dev/null)
chmod -R u=rwX,go=rX "$rt"

install -m 0644 "$pkg/browserd.service" "$stage/lib/systemd/system/browserd.service"
# 0600: it may hold the admin token.
install -m 0600 "$pkg/browserd.conf" "$stage/etc/browserd/browserd.conf"
install -m 0644 README.md docs/operator.md docs/packaging.md "$stage/usr/share/doc/browserd/"

install -m 0644 "$pkg/conffiles" "$stage/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "$pkg/$s" "$stage/DEBIAN/$s"; done

# The shared libraries the binary links, as Debian package names with versions.
shl=$build/deb/shlibs
mkdir -p "$shl/debian"
printf 'Source: browserd\n\nPackage: browserd\nArchitecture: any\n' >"$shl/debian/control"
abs=$(cd "$stage" && pwd)
shlibs=$(cd "$shl" && dpkg-shlibdeps -O "$abs/usr/bin/browserd" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "deb: dpkg-shlibdeps found no libraries" >&2; exit 1; }

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
maintainer=${DEB_MAINTAINER:-"$(git config user.name) <$(git config user.email)>"}
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" \
    -e "s|@SHLIBS@|$shlibs|" -e "s|@MAINTAINER@|$maintainer|" \
    "$pkg/control.in" >"$stage/DEBIAN/control"

dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
echo "$out"
