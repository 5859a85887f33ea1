#!/usr/bin/env bash
# test_packages.sh SRC DIR — the Debian packages end to end (issue 30
# item 3): builds them (ceph-conf/build-debs.sh, into DIR), installs them
# on this machine with dpkg -i, runs test_installed.sh on /usr (a C
# program through pkg-config and one through find_package save and
# restore; a test cluster loads the classes from Ceph's class directory;
# `import rckpt` with no variable), then purges them and checks that
# nothing of them is left. It changes the machine: it runs only as root
# with RCKPT_PACKAGE_TEST=1 (CI sets it); otherwise it tests the same
# install rules under DIR instead (build_and_test.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ne 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	echo "usage: test_packages.sh SRC DIR" >&2
	exit 2
fi
src=$(cd "$1" && pwd)
dir=$2
if [ "${RCKPT_PACKAGE_TEST:-0}" != 1 ] || [ "$(id -u)" != 0 ]; then
	echo "# RCKPT_PACKAGE_TEST is not 1 (or not root): testing a staged install instead of the packages"
	exec bash "$here/build_and_test.sh" "$src" "$dir"
fi
. "$here/../testlib.sh"
pkgs=(librckpt0 librckpt-dev rckpt rckpt-osd-classes python3-rckpt)
mkdir -p "$dir"
check "the packages build" bash "$src/ceph-conf/build-debs.sh" --out "$dir/debs" --jobs 1
check "  lintian finds no error" bash -c "! grep -q '^E:' '$dir/debs/lintian.txt'"
debs=()
for p in "${pkgs[@]}"; do debs+=("$(ls "$dir"/debs/${p}_*.deb 2>/dev/null | head -1)"); done
check "  all five" test "${#debs[@]}" -eq 5 -a -f "${debs[0]}" -a -f "${debs[4]}"
check "dpkg -i installs them" expect_run 0 "$dir/dpkg-i.log" dpkg -i "${debs[@]}"
check "the osd classes' package wants this ceph-osd exactly" bash -c \
	"dpkg-deb -f '${debs[3]}' Depends | grep -q \"ceph-osd (= \$(dpkg-query -W -f='\${Version}' ceph-osd))\""
bash "$here/test_installed.sh" /usr
installed=$?
check "the installed software works (test_installed.sh /usr)" test "$installed" -eq 0
files=$(dpkg -L "${pkgs[@]}" 2>/dev/null | while read -r f; do [ -f "$f" ] && echo "$f"; done)
check "dpkg --purge removes them" expect_run 0 "$dir/dpkg-purge.log" dpkg --purge "${pkgs[@]}"
check "  and every file they installed" bash -c "for f in $(echo $files); do [ ! -e \"\$f\" ] || { echo \"  left: \$f\" >&2; exit 1; }; done"
check "  the Python package's folder too" test ! -e /usr/lib/python3/dist-packages/rckpt
finish
