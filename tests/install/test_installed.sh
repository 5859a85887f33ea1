#!/usr/bin/env bash
# test_installed.sh PREFIX — rckpt as installed (issue 30 item 3): from the
# Debian packages (PREFIX /usr) or `cmake --install build --prefix DIR`.
# Starts a test cluster of its own whose OSDs load the object classes from
# the installed class directory, then:
#   - a C program built with `pkg-config --cflags --libs rckpt` (and one
#     linked statically with `pkg-config --static`) saves and restores;
#   - the same program built by a CMake project with find_package(rckpt);
#   - `python3 -c 'import rckpt'` works with no environment variable (for
#     a staged PREFIX only its PYTHONPATH and the loader's path are set);
#   - the installed `rckpt status` sees both plugins at its version.
# Needs the local-cluster script of this tree, cmake, cc and pkg-config.
set -u
. "$(dirname "$0")/../testlib.sh"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	echo "usage: test_installed.sh PREFIX (/usr for the packages)" >&2
	exit 2
fi
prefix=$(cd "$1" && pwd) || exit 2
pc=$(ls -d "$prefix"/lib/*/pkgconfig/rckpt.pc "$prefix"/lib/pkgconfig/rckpt.pc 2>/dev/null | head -1)
[ -n "$pc" ] || { echo "test_installed.sh: no rckpt.pc under $prefix/lib" >&2; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
classes=$(ls -d "$libdir"/rados-classes 2>/dev/null)
t=$(mktemp -d)
cluster=$t/cluster
cleanup() {
	"$repo/ceph-conf/local-cluster.sh" --dir "$cluster" stop >/dev/null 2>&1
	rm -rf "$t"
}
trap cleanup EXIT
export PKG_CONFIG_PATH=$libdir/pkgconfig
vars=()
if [ "$prefix" != /usr ]; then # a staged tree: how its users would point at it
	vars=("LD_LIBRARY_PATH=$libdir" "PYTHONPATH=$prefix/lib/python3/dist-packages")
fi
env_run=(env -u RCKPT_LIBRARY -u LD_PRELOAD "${vars[@]}")
rckpt=$prefix/bin/rckpt

check "the classes are in the installed class directory" test -f "$classes/libcls_rckpt.so" -a -f "$classes/libcls_pcr.so"
check "a test cluster loads them from there" expect_run 0 "$t/o" "$repo/ceph-conf/local-cluster.sh" --dir "$cluster" \
	--plugins "$classes" --osd-bytes 1073741824 start
export CEPH_CONF=$cluster/ceph.conf
v=$(sed -n 's/^Version: //p' "$pc")
check "the installed rckpt status sees both plugins at $v" expect_run 0 "$t/o" "${env_run[@]}" "$rckpt" status
check "  rckpt $v" grep -qE "^plugin +rckpt +$v " "$t/o"
check "  pcr $v" grep -qE "^plugin +pcr +$v " "$t/o"
check "  the OSD logged loading them" bash -c "grep -q 'loading rckpt class $v' '$cluster'/log/osd.*.log && grep -q 'loading pcr class $v' '$cluster'/log/osd.*.log"
check "  the command's manual page" bash -c "ls '$prefix'/share/man/man1/rckpt-ckpt.1* >/dev/null"

# pkg-config
check "pkg-config --cflags --libs rckpt builds a program" \
	cc -o "$t/rt" "$here/roundtrip.c" $(pkg-config --cflags --libs rckpt) -lm
check "  which saves and restores" expect_run 0 "$t/o" "${env_run[@]}" "$t/rt"
check "  against the installed library" contains "$t/o" "librckpt $v"
check "pkg-config --static links librckpt.a" bash -c "cc -o '$t/rt-static' '$here/roundtrip.c' \
	\$(pkg-config --cflags rckpt) '$libdir/librckpt.a' \$(pkg-config --static --libs rckpt | sed 's/-lrckpt\\b//') -lm"
check "  without librckpt.so" bash -c "ldd '$t/rt-static' >'$t/ldd' && ! grep -q librckpt '$t/ldd'"
check "  and saves and restores" expect_run 0 "$t/o" "$t/rt-static"

# CMake
check "find_package(rckpt) configures" expect_run 0 "$t/o" cmake -S "$here/cmake-project" -B "$t/cm" \
	-DCMAKE_PREFIX_PATH="$prefix"
check "  and builds" expect_run 0 "$t/o" cmake --build "$t/cm"
check "  a program that saves and restores" expect_run 0 "$t/o" "${env_run[@]}" "$t/cm/roundtrip"

# Python, with no RCKPT_LIBRARY
check "import rckpt with no variable" expect_run 0 "$t/o" "${env_run[@]}" /usr/bin/python3 -c 'import rckpt; print(rckpt.__version__, rckpt._lib.lib._name)'
check "  the installed package and library" grep -qx "$v librckpt.so.0" "$t/o"
finish
