#!/bin/bash
# check_rados_symbols.sh BUILD_DIR — only the I/O layer (rckpt_io_rados.c)
# and the handle's connection code (rckpt_handle.c) of librckpt call
# librados; the rest goes through rckpt_io (client/lib/rckpt_io.h), and the
# rckpt command not at all. Reads the undefined symbols of every object file
# of the library and of the command (nm -u); fails naming each rados_* one
# found elsewhere.
set -u
if [ $# -ne 1 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
	echo "usage: check_rados_symbols.sh BUILD_DIR" >&2
	exit 2
fi
build=$1
src=$(cd "$(dirname "$0")/.." && pwd)
allowed='/(rckpt_io_rados|rckpt_handle)\.c\.o$'
objs=$(find "$build/client/CMakeFiles/rckpt_obj.dir" "$build/client/CMakeFiles/rckpt.dir" -name '*.o' 2>/dev/null | sort)
if [ -z "$objs" ]; then
	echo "check_rados_symbols: no object files under $build/client (build first)" >&2
	exit 1
fi
bad=0 n=0 callers=0
for o in $objs; do
	rel=${o#*/CMakeFiles/rckpt_obj.dir/}
	rel=${rel#*/CMakeFiles/rckpt.dir/}
	[ -f "$src/client/${rel%.o}" ] || continue # left by an older layout of the tree
	n=$((n + 1))
	syms=$(nm -u "$o" | awk '{print $NF}' | grep '^rados_' | sort -u | tr '\n' ' ')
	[ -z "$syms" ] && continue
	if [[ $o =~ $allowed ]]; then
		callers=$((callers + 1))
		continue
	fi
	echo "check_rados_symbols: ${o#"$build"/} calls librados: $syms" >&2
	bad=$((bad + 1))
done
if [ $callers -eq 0 ]; then
	echo "check_rados_symbols: no object calls librados at all: not the objects this script expects" >&2
	exit 1
fi
if [ $bad -gt 0 ]; then
	echo "check_rados_symbols: $bad object file(s) call librados outside the I/O layer" >&2
	exit 1
fi
echo "check_rados_symbols: $n object files; librados is called only by the I/O layer and the connection code"
