#!/usr/bin/env bash
# build_and_test.sh SRC DIR — builds SRC as a user installs it (a plain
# release build: no sanitizers, no tests, no CUDA), installs it under
# DIR/root with `cmake --install`, and runs test_installed.sh on that
# tree. The Debian packages are the same install rules
# (docs/operations.md, "Installing"). ctest runs this beside the cluster
# tests (test_installed).
set -eu
if [ $# -ne 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	echo "usage: build_and_test.sh SRC DIR" >&2
	exit 2
fi
src=$(cd "$1" && pwd)
dir=$2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
echo "# building $src in $dir/build (release, no tests, no CUDA)"
cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DRCKPT_BUILD_TESTS=OFF -DRCKPT_CUDA=OFF \
	-DRCKPT_SANITIZE=OFF >"$dir/configure.log" 2>&1 || { tail -20 "$dir/configure.log"; exit 1; }
cmake --build "$dir/build" -j"${RCKPT_INSTALL_TEST_JOBS:-1}" >"$dir/build.log" 2>&1 || { tail -30 "$dir/build.log"; exit 1; }
rm -rf "$dir/root"
cmake --install "$dir/build" --prefix "$dir/root" >"$dir/install.log" 2>&1 || { tail -20 "$dir/install.log"; exit 1; }
exec bash "$src/tests/install/test_installed.sh" "$dir/root"
