#!/bin/bash
# cmocka_run.sh PROGRAM [ARG...]: runs a cmocka test program for ctest and
# passes its output and exit status through, but for one case: a program
# whose output says a case was SKIPPED while it exits 0 fails here, for
# ctest would show it as "Passed". A program skips through
# tests/common/test_skip.h (TEST_SKIP, then test_exit: exit 77, which
# ctest shows as "Skipped").
[ $# -ge 1 ] || { echo "usage: cmocka_run.sh PROGRAM [ARG...]" >&2; exit 2; }
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ] && grep -q '^\[  SKIPPED \]' "$log"; then
	echo "cmocka_run.sh: $(basename "$1") skipped cases but exited 0, so ctest would say Passed;" \
		"skip through tests/common/test_skip.h (TEST_SKIP and test_exit: exit 77)" >&2
	exit 1
fi
exit "$rc"
