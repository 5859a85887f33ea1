#!/usr/bin/env bash
# test_crash.sh RCKPT CLUSTER-SCRIPT PLUGIN-DIR [--runs N] [--osds 1|3] [--keep]
#
# Crash consistency on a cluster of its own (bluestore, so an OSD that is
# killed comes back with its data): N runs (default 6, or $RCKPT_CRASH_RUNS; the full run is
# 1000), each injecting one fault at a random moment:
#
#   client   SIGKILL the saving client
#   osd-save SIGKILL an OSD during a save, then restart it
#   osd-comp SIGKILL an OSD during a compaction (retention: keep every step)
#   osd-read SIGKILL an OSD during a restore
#
# After each: the next writer saves a step by itself (a stale lock lapses,
# leftovers are trimmed); every committed step is still listed (none lost)
# and restores to the same SHA-256 as when it was first committed (all of
# them every 10 runs and at the end, the newest and a random one otherwise).
# With --osds 3 (pool size 2) one OSD is also stopped for a stretch of runs:
# saves and restores go on with the others. Prints runs, faults per kind,
# steps verified, steps lost (must be 0). Every 100 runs the job is verified
# whole and a new one begins (the old one deleted), so a run costs the same
# at run 1000 as at run 1.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1 script=$2 plugins=$3
shift 3
runs=${RCKPT_CRASH_RUNS:-6}
round=${RCKPT_CRASH_ROUND:-100} # runs per job
osds=1
keep=0
while [ $# -gt 0 ]; do
	case "$1" in
	--runs) runs=$2; shift 2 ;;
	--osds) osds=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "test_crash.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
if ! command -v ceph-osd >/dev/null; then
	skip_test cluster "Ceph is not installed (./dev.sh test installs it)"
fi
need_real_checkpoints
src=$RCKPT_TEST_CKPT_DIR
t=$(mktemp -d)
dir=$t/cluster
export HOME=$t/home
mkdir -p "$HOME"
cleanup() {
	"$script" --dir "$dir" stop >/dev/null 2>&1
	[ "$keep" = 1 ] && echo "kept $t" || rm -rf "$t"
}
trap cleanup EXIT
size=$((osds > 1 ? 2 : 1))
echo "starting a bluestore cluster of $osds OSD(s), pool size $size ..."
"$script" --dir "$dir" --plugins "$plugins" --store bluestore --osds "$osds" --pool-size "$size" \
	--osd-bytes 3221225472 start >"$t/start.log" 2>&1 || { cat "$t/start.log"; exit 1; }
export CEPH_CONF=$dir/ceph.conf
# a copy of its own: a long run outlives a fixture that is made again meanwhile
mkdir -p "$t/ckpts" && cp "$src"/step-*.safetensors "$t/ckpts/" || exit 1
mapfile -t ckpts < <(ls "$t/ckpts"/step-*.safetensors | grep -v '\.grads\.' | sort)
n=${#ckpts[@]}
job=crash-$$-1
declare -A sha     # step -> SHA-256 of its restore, when first committed
faults=(client osd-save osd-comp osd-read)
[ "$osds" -gt 1 ] && faults_all=("${faults[@]}" osd-away) || faults_all=("${faults[@]}")
declare -A count
verified=0 lost=0 changed=0 resumed=0 failed_resume=0 committed=0 verify_failed=0

osd_pid() { tr -dc 0-9 <"$dir/run/osd.$1.pid" 2>/dev/null; }
kill_osd() { local p; p=$(osd_pid "$1"); [ -n "$p" ] && kill -9 "$p" 2>/dev/null; }
restart() { "$script" --dir "$dir" --plugins "$plugins" start >>"$t/start.log" 2>&1 || { echo "restart failed" >&2; tail -20 "$t/start.log" >&2; }; }
# the committed steps: lines "STEP KIND ..." of `ckpt ls` (not its "N steps, ..." total)
steps_now() { "$rckpt" --timeout 60 ckpt ls --job "$job" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ && $2 !~ /^steps?,/ {print $1}'; }
restore_sha() { # step -> its SHA-256, or nothing
	"$rckpt" --timeout 60 ckpt restore --job "$job" --step "$1" -o "$t/r.safetensors" >/dev/null 2>&1 &&
		sha256sum "$t/r.safetensors" | cut -d' ' -f1
}
record_new() { # SHA of every committed step not seen yet
	local s h
	for s in $(steps_now); do
		[ -n "${sha[$s]:-}" ] && continue
		h=$(restore_sha "$s") && sha[$s]=$h
	done
}
verify() { # all | some
	local listed s h
	listed=" $(steps_now | tr '\n' ' ') "
	for s in "${!sha[@]}"; do
		if [[ "$listed" != *" $s "* ]]; then
			lost=$((lost + 1))
			echo "  step $s LOST" >&2
			unset "sha[$s]"
			continue
		fi
		[ "$1" = all ] || [ $((RANDOM % 8)) -eq 0 ] || continue
		h=$(restore_sha "$s")
		verified=$((verified + 1))
		if [ "$h" != "${sha[$s]}" ]; then
			changed=$((changed + 1))
			echo "  step $s restores to other bytes (or not at all)" >&2
		fi
	done
}

next=1
save_some() { # background: a writer saving from step $next on
	local k=$((RANDOM % (n - 4)))
	exec "$rckpt" --timeout 60 ckpt save --job "$job" --lease 2 --step "$next" "${ckpts[@]:k:4}" >"$t/save.log" 2>&1
}
# the first steps
"$rckpt" ckpt save --job "$job" --lease 2 --step 1 "${ckpts[@]:0:3}" >/dev/null
next=4
record_new
down=""
for ((r = 1; r <= runs; r++)); do
	f=${faults[$((r <= ${#faults[@]} ? r - 1 : RANDOM % ${#faults[@]}))]} # each kind once, first
	victim=$((RANDOM % osds))
	if [ "$osds" -gt 1 ] && [ $((r % 10)) -eq 5 ] && [ -z "$down" ]; then
		down=$(((victim + 1) % osds))
		kill_osd "$down" # one OSD away for a few runs; the pool has another copy
		count[osd-away]=$((${count[osd-away]:-0} + 1))
	fi
	[ -n "$down" ] && f=client # with one OSD away, another killed could take both copies
	# the operation in flight, then the fault; a killed OSD is restarted at
	# once (the operation waits for it, as a client waits for a real OSD)
	case $f in
	client | osd-save) save_some & ;;
	osd-comp) "$rckpt" --timeout 60 ckpt compact --job "$job" >/dev/null 2>&1 & ;;
	osd-read)
		s=$(steps_now | shuf -n 1)
		"$rckpt" --timeout 60 ckpt restore --job "$job" --step "${s:-1}" -o "$t/x.safetensors" >/dev/null 2>&1 &
		;;
	esac
	pid=$!
	if [ "$f" = client ] || [ "$f" = osd-save ]; then sleep "0.$((RANDOM % 60))"; else sleep "0.0$((RANDOM % 10))"; fi
	if [ "$f" = client ]; then
		kill -9 "$pid" 2>/dev/null
	else
		kill_osd "$victim"
		restart
		[ -n "$down" ] && kill_osd "$down" # still away
	fi
	wait "$pid" 2>/dev/null
	st=$?
	count[$f]=$((${count[$f]:-0} + 1))
	if [ -n "$down" ] && [ $((r % 10)) -eq 8 ]; then
		down=""
		restart # the OSD that was away comes back
	fi
	# the next writer takes over by itself (the killed one's lease lapses)
	last=$(steps_now | tail -1)
	next=$((${last:-0} + 1))
	# a writer that died holding the lock: its lease (2 s) must lapse
	{ [ "$f" = client ] || [ "$st" -ne 0 ]; } && sleep 2.2
	if "$rckpt" --timeout 60 ckpt save --job "$job" --lease 2 --step "$next" "${ckpts[$((RANDOM % n))]}" \
		>"$t/resume.log" 2>&1; then
		resumed=$((resumed + 1))
	else
		failed_resume=$((failed_resume + 1))
		sed 's/^/  resume: /' "$t/resume.log" >&2
	fi
	next=$((next + 1))
	if [ $((r % 10)) -eq 0 ]; then verify all; else verify some; fi
	record_new
	if [ $((r % round)) -eq 0 ] && [ "$r" -lt "$runs" ]; then # a new job
		[ -n "$down" ] && { down=""; restart; } # (verified whole just above)
		"$rckpt" --timeout 60 ckpt verify --job "$job" >"$t/o" 2>&1 || { echo "  $job does not verify:" >&2; cat "$t/o" >&2; verify_failed=$((verify_failed + 1)); }
		"$rckpt" --timeout 60 ckpt rm --job "$job" >/dev/null 2>&1
		committed=$((committed + ${#sha[@]}))
		sha=()
		job=crash-$$-$((r / round + 1))
		"$rckpt" ckpt save --job "$job" --lease 2 --step 1 "${ckpts[@]:0:3}" >/dev/null
		next=4
		record_new
		echo "  run $r: $verified restores verified, $lost lost, $changed changed so far" >&2
	fi
done
[ -n "$down" ] && restart
verify all
echo "runs $runs, osds $osds: faults $(for f in "${faults_all[@]}"; do printf '%s=%s ' "$f" "${count[$f]:-0}"; done)"
echo "steps committed $((committed + ${#sha[@]})), restores verified $verified, steps lost $lost, changed $changed, writers resumed $resumed/$runs"
check "no committed step lost" test "$lost" -eq 0
check "every committed step restores to its bytes" test "$changed" -eq 0
check "the next writer always resumes" test "$failed_resume" -eq 0
check "steps were verified" test "$verified" -gt 0
check "every earlier job verified" test "$verify_failed" -eq 0
check "the job verifies" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$job"
finish
