#!/usr/bin/env bash
# fixture.sh "MODULES" DIR CMD...: make a test fixture in DIR, afresh, with
# CMD, when Debian's python3 has every one of MODULES (space-separated);
# else skip (tests/testlib.sh's skip_test: a failure in CI).
set -euo pipefail
. "$(dirname "$0")/testlib.sh"
mods=$1 dir=$2
shift 2
for m in $mods; do
	/usr/bin/python3 -c "import $m" 2>/dev/null || skip_test data "python3 cannot import $m (its Debian package is not installed)"
done
rm -rf "$dir"
exec "$@"
