#!/usr/bin/env bash
# crash_loop.sh [TRAINER ARGS...] — runs examples/train_lm.py the way a
# shell loop, torchrun or a supervisor restarts a trainer: again at once
# (no sleep) whenever it dies, until it exits 0. The first run kills
# itself with SIGKILL in the middle of the save of step $CRASH_AT (default
# 100); the restart takes the job's lock over at once (its holder has
# exited) and resumes from the newest committed step.
#
#   export CEPH_CONF=$PWD/build/cluster/ceph.conf
#   examples/crash_loop.sh --job my-run --steps 300
set -u
here=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in -h | --help) sed -n '2,10p' "$0" | cut -c3-; exit 0 ;; esac
marker=$(mktemp -u /tmp/rckpt-crash.XXXXXX)
trap 'rm -f "$marker"' EXIT
for run in 1 2 3 4 5; do
	"${PYTHON:-/usr/bin/python3}" "$here/train_lm.py" --crash-at "${CRASH_AT:-100}" --crash-marker "$marker" "$@"
	rc=$?
	[ $rc -eq 0 ] && exit 0
	echo "crash_loop.sh: run $run ended with status $rc; restarting at once" >&2
done
echo "crash_loop.sh: gave up after 5 runs" >&2
exit 1
