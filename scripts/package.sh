#!/usr/bin/env bash
# Build the Debian packages (debian/) of the committed HEAD:
#   embgw, libegw-client2, libegw-client-dev, python3-embgw
# into OUTDIR (default build-packages/), with dpkg-buildpackage -b -us -uc
# in a clone of this repository under a temporary directory (so that
# dpkg-buildpackage's output lands there, not beside the checkout, and
# git describe still works), then lintian over them; its report is
# OUTDIR/lintian.txt, its errors the exit status. Needs what
# scripts/deps.sh installs (debhelper, dh-python, dpkg-dev, lintian and
# the build dependencies).
# usage: package.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$(realpath -m "${1:-build-packages}")
tmp=$(mktemp -d /tmp/embgw-package.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
[ -z "$(git status --porcelain --untracked-files=no -- debian)" ] ||
	echo "package: debian/ has uncommitted changes; building HEAD without them" >&2
git clone -q --no-hardlinks "$repo" "$tmp/embgw"
git -C "$tmp/embgw" checkout -q "$(git rev-parse HEAD)"
start=$(date +%s)
echo "package: dpkg-buildpackage -b -us -uc ($(git rev-parse --short HEAD))"
if ! (cd "$tmp/embgw" && dpkg-buildpackage -b -us -uc) >"$tmp/build.log" 2>&1; then
	tail -30 "$tmp/build.log" >&2
	echo "package: FAILED - dpkg-buildpackage (log above)" >&2
	exit 1
fi
echo "package: built in $(($(date +%s) - start)) s"
mkdir -p "$out"
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
mv "$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo "$out"/
cp "$tmp/build.log" "$out/build.log"
lintian --info "$out"/*.changes >"$out/lintian.txt" 2>&1 || :
errors=$(grep -c "^E: " "$out/lintian.txt" || :)
warnings=$(grep -c "^W: " "$out/lintian.txt" || :)
ls "$out"/*.deb
echo "package: lintian: $errors error(s), $warnings warning(s) ($out/lintian.txt)"
[ "$errors" -eq 0 ]
