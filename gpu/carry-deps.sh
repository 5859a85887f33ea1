#!/usr/bin/env bash
# carry-deps.sh DIR — unpack Debian's packages of what the GPU-only
# configuration links (gpu/gpu-only.cmake) into DIR, for a machine that lacks
# them: a lent device machine has CUDA, CMake and Python but none of the
# project's -dev packages, and no package registry. Run it here; DIR (inside
# the work tree, ignored by git) then travels with the device call's carry,
# and gpu/device-check.sh --deps DIR builds against it.
#
#   zstd, libcrypto, jansson: headers and static libraries (the programs
#     need none of them at run time)
#   cmocka: header and shared library (test_gpu_parity's RPATH finds it)
#
# The packages are fetched with apt-get download (Debian's registry), or
# taken from /var/cache/apt/archives when they are there.
set -euo pipefail
prog=${0##*/}
usage() { echo "usage: $prog DIR  (unpacks libzstd-dev libssl-dev libjansson-dev libcmocka-dev libcmocka0 into DIR)"; }
case "${1:-}" in
-h | --help) usage; exit 0 ;;
'' | -*) usage >&2; exit 2 ;;
esac
[ $# -eq 1 ] || { usage >&2; exit 2; }
dir=$1
pkgs=(libzstd-dev libssl-dev libjansson-dev libcmocka-dev libcmocka0)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work" # apt-get download writes as its own user
cd "$work"
for p in "${pkgs[@]}"; do
	v=$(apt-cache policy "$p" | sed -n 's/^  Candidate: //p')
	[ -n "$v" ] && [ "$v" != "(none)" ] || { echo "$prog: apt knows no package $p" >&2; exit 1; }
	deb=$(ls /var/cache/apt/archives/"${p}_${v//:/%3a}"_*.deb 2>/dev/null | head -1 || true)
	if [ -n "$deb" ]; then
		cp "$deb" .
	else
		apt-get download -q=2 "$p=$v" || { echo "$prog: cannot download $p $v" >&2; exit 1; }
	fi
done
for deb in ./*.deb; do
	dpkg -x "$deb" "$dir"
	echo "$prog: $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
done
# documentation and what nothing links (libssl): not carried
rm -rf "$dir/usr/share" "$dir"/usr/lib/*/libssl.* "$dir"/usr/lib/*/libcmockery.so
# what the configuration looks for, there
for f in usr/include/zstd.h usr/include/openssl/sha.h usr/include/jansson.h usr/include/cmocka.h; do
	[ -e "$dir/$f" ] || { echo "$prog: $f missing from the unpacked packages" >&2; exit 1; }
done
for l in libzstd.a libcrypto.a libjansson.a libcmocka.so; do
	ls "$dir"/usr/lib/*/"$l" >/dev/null 2>&1 || { echo "$prog: $l missing from the unpacked packages" >&2; exit 1; }
done
echo "$prog: $(du -sh "$dir" | cut -f1) in $dir; configure with -DCMAKE_PREFIX_PATH=$dir/usr"
