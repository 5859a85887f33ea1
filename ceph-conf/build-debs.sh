#!/usr/bin/env bash
# build-debs.sh — builds rckpt's Debian packages from this source tree
# (docs/operations.md, "Installing"): librckpt0, librckpt-dev, rckpt,
# rckpt-osd-classes (for this machine's exact Ceph) and python3-rckpt.
# The tree keeps its packaging in ceph-conf/debian; the build copies the
# tree (tracked and new files, not ignored ones) into a scratch folder with
# that folder as its debian/, writes debian/changelog from the version in
# client/include/rckpt.h, runs dpkg-buildpackage, then lintian.
set -euo pipefail
prog=${0##*/}
repo=$(cd "$(dirname "$0")/.." && pwd)

usage() {
	cat <<EOF
usage: $prog [--out DIR] [--no-lintian] [--jobs N]

Builds the Debian packages of this tree into DIR (default: build/debs) and
prints lintian's report of them (kept in DIR/lintian.txt). Needs
dpkg-dev, debhelper and lintian (./dev.sh deps installs them) and the
build dependencies of ceph-conf/debian/control.

  --out DIR      where the .deb files go (created; older rckpt .debs there
                 are replaced)
  --no-lintian   skip lintian
  --jobs N       parallel build jobs (default: the online CPUs)
  -h, --help     this text
EOF
}
die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*; try '$prog --help'" >&2; exit 2; }

out=$repo/build/debs lint=1 jobs=$(nproc)
while [ $# -gt 0 ]; do
	case $1 in
	--out) [ $# -ge 2 ] || usage_error "--out needs a value"; out=$2; shift 2 ;;
	--no-lintian) lint=0; shift ;;
	--jobs) [ $# -ge 2 ] || usage_error "--jobs needs a value"; jobs=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
done
[[ "$jobs" =~ ^[1-9][0-9]{0,2}$ ]] || usage_error "--jobs must be 1..999"
for t in dpkg-buildpackage dh; do
	command -v "$t" >/dev/null || die "$t is missing: install dpkg-dev and debhelper (./dev.sh deps)"
done
[ "$lint" = 0 ] || command -v lintian >/dev/null || die "lintian is missing (./dev.sh deps), or give --no-lintian"

hdr=$repo/client/include/rckpt.h
version=$(sed -n 's/^#define RCKPT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$hdr" | paste -sd.)
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cannot read the version from $hdr"

mkdir -p "$out"
out=$(cd "$out" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
src=$scratch/rckpt-$version
mkdir -p "$src"
echo "$prog: copying the tree (version $version)"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf -) | tar -xf - -C "$src"
else
	(cd "$repo" && tar --exclude='./build*' --exclude='./.git' -cf - .) | tar -xf - -C "$src"
fi
rm -rf "$src/debian"
cp -r "$repo/ceph-conf/debian" "$src/debian"
cat >"$src/debian/changelog" <<EOF
rckpt ($version) unstable; urgency=medium

  * Built from the rckpt source tree at version $version.

 -- rckpt developers <rckpt-dev@example.org>  $(date -R)
EOF

echo "$prog: dpkg-buildpackage (binary packages, $jobs jobs)"
log=$out/build.log
if ! (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$jobs" dpkg-buildpackage -us -uc -b) >"$log" 2>&1; then
	tail -n 40 "$log" >&2
	die "dpkg-buildpackage failed (log: $log)"
fi
rm -f "$out"/*.deb
mv "$scratch"/*.deb "$out"/
mv "$scratch"/*.changes "$scratch"/*.buildinfo "$out"/ 2>/dev/null || true
ls -1 "$out"/*.deb
if [ "$lint" = 1 ]; then
	echo "$prog: lintian"
	# lintian exits non-zero when it finds errors; the report says which
	lintian --info --display-info "$out"/*.changes >"$out/lintian.txt" 2>&1 || true
	if [ -s "$out/lintian.txt" ]; then cat "$out/lintian.txt"; else echo "(lintian: nothing to report)"; fi
fi
