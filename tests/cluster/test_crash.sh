#!/usr/bin/env bash
# test_crash.sh RCKPT CLUSTER-SCRIPT PLUGIN-DIR [--runs N] [--osds 1|3] [--keep]
#
# Crash consistency on a cluster of its own (bluestore, so an OSD that is
# killed comes back with its data): N runs (default 6, or $RCKPT_CRASH_RUNS; the full run is
# 1000), each injecting one fault at a random moment:
#
#   client    SIGKILL the saving client
#   osd-save  SIGKILL an OSD during a save, then restart it
#   osd-comp  SIGKILL an OSD during a compaction (retention: keep every step)
#   osd-read  SIGKILL an OSD during a restore
#   osd-keep  SIGKILL an OSD during a compaction of a second job with a
#             retention policy (--keep-last 3 --keep-every 5) and a pinned step
#   pause     SIGSTOP the saving client past its lease (2 s); another writer
#             takes the job and saves a step; then SIGCONT: the paused
#             writer's requests go out late, and must change nothing
#             committed (formats/store.md, "Fencing")
#   pause-comp SIGSTOP a compaction; a writer saves a step (claiming the
#             job anew); then SIGCONT: the compaction's late stages are
#             refused, and it starts again from the new head or fails
#             cleanly
#
# The oracle is the writer's own acknowledgement, not the store's listing:
# every step a save printed as committed ("step N ...", printed once
# rckpt_save_wait returned) must stay listed and restorable after every
# fault, unless the job's retention policy may drop it. Its first restore
# must be the checkpoint file it was saved from (tests/close_to_source.py:
# lossless tensors bit-equal, quantized ones within eps; an oracle that
# shares no code with the decoder), and every later restore the same
# SHA-256. An acknowledged step whose restore fails counts as lost.
#
# After each fault the next writer saves a step by itself (a stale lock
# lapses, leftovers are trimmed). The acknowledged steps restore all every 10
# runs and at the end, the newest and a random one otherwise.
# With --osds 3 (pool size 2) one OSD is also stopped for a stretch of runs:
# saves and restores go on with the others. Prints runs, faults per kind,
# steps acknowledged and verified, steps lost (must be 0). Every 100 runs the
# job is verified whole and a new one begins (the old one deleted), so a run
# costs the same at run 1000 as at run 1.
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
job=crash-$$-1 rjob=crash-$$-keep
here=$(cd "$(dirname "$0")" && pwd)
declare -A sha     # job's acknowledged step -> SHA-256 of its first restore
declare -A rsha    # the same for the retention job, while its policy keeps it
declare -A pinned  # the retention job's pinned steps
declare -a plan    # step -> the checkpoint file it is being saved from
faults=(client osd-save osd-comp osd-read osd-keep pause pause-comp)
[ "$osds" -gt 1 ] && faults_all=("${faults[@]}" osd-away) || faults_all=("${faults[@]}")
declare -A count
verified=0 lost=0 changed=0 wrong=0 resumed=0 failed_resume=0 verify_failed=0 acked=0 died=0

osd_pid() { tr -dc 0-9 <"$dir/run/osd.$1.pid" 2>/dev/null; }
kill_osd() { local p; p=$(osd_pid "$1"); [ -n "$p" ] && kill -9 "$p" 2>/dev/null; }
restart() { "$script" --dir "$dir" --plugins "$plugins" start >>"$t/start.log" 2>&1 || { echo "restart failed" >&2; tail -20 "$t/start.log" >&2; }; }
# the committed steps of job $1: lines "STEP KIND ..." of `ckpt ls` (not its "N steps, ..." total)
steps_of() { "$rckpt" --timeout 60 ckpt ls --job "$1" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ && $2 !~ /^steps?,/ {print $1}'; }
steps_now() { steps_of "$job"; }
restore_sha() { # JOB STEP -> its SHA-256 (restored into $t/r.safetensors), or nothing
	"$rckpt" --timeout 60 ckpt restore --job "$1" --step "$2" -o "$t/r.safetensors" >/dev/null 2>&1 &&
		sha256sum "$t/r.safetensors" | cut -d' ' -f1
}
# plan_save FIRST K C: steps FIRST.. will be ckpts[K..K+C); sets files[]
plan_save() {
	local i
	files=("${ckpts[@]:$2:$3}")
	for ((i = 0; i < $3; i++)); do plan[$(($1 + i))]=${ckpts[$2 + i]}; done
}
# save JOB FIRST: the planned files from step FIRST on (run it in the background, or not)
save() { exec "$rckpt" --timeout 60 ckpt save --job "$1" --lease 2 --step "$2" "${files[@]}"; }
# take_acks JOB LOG SHAVAR: every step the save's LOG acknowledged: its first
# restore must be its source checkpoint; its SHA-256 is kept in SHAVAR
take_acks() {
	local -n into=$3
	local s h
	for s in $(awk '$1 == "step" && $2 ~ /^[0-9]+$/ {print $2}' "$2"); do
		[ -n "${into[$s]:-}" ] && continue
		acked=$((acked + 1))
		h=$(restore_sha "$1" "$s")
		if [ -z "$h" ]; then
			lost=$((lost + 1))
			echo "  $1 step $s: acknowledged, but it does not restore" >&2
			into[$s]=unrestorable
			continue
		fi
		if ! /usr/bin/python3 "$here/../close_to_source.py" "${plan[$s]}" "$t/r.safetensors"; then
			wrong=$((wrong + 1))
			echo "  $1 step $s: restores to something other than ${plan[$s]##*/}" >&2
		fi
		into[$s]=$h
	done
}
verify_job() { # JOB SHAVAR all|some
	local -n of=$2
	local listed s h
	listed=" $(steps_of "$1" | tr '\n' ' ') "
	for s in "${!of[@]}"; do
		[ "${of[$s]}" = unrestorable ] && continue # counted once, when acknowledged
		if [[ "$listed" != *" $s "* ]]; then
			lost=$((lost + 1))
			echo "  $1 step $s: acknowledged, and LOST" >&2
			unset "of[$s]"
			continue
		fi
		[ "$3" = all ] || [ $((RANDOM % 8)) -eq 0 ] || continue
		h=$(restore_sha "$1" "$s")
		verified=$((verified + 1))
		if [ "$h" != "${of[$s]}" ]; then
			changed=$((changed + 1))
			echo "  $1 step $s restores to other bytes (or not at all)" >&2
		fi
	done
}
verify() { verify_job "$job" sha "$1"; verify_job "$rjob" rsha "$1"; }

# the first steps of both jobs
plan_save 1 0 3
(save "$job" 1) >"$t/save.log" 2>&1
take_acks "$job" "$t/save.log" sha
(save "$rjob" 1) >"$t/save.log" 2>&1
take_acks "$rjob" "$t/save.log" rsha
next=4 rnext=4
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
	if [ "$f" = osd-keep ]; then
		# two more steps and a pin; then the steps the policy keeps, known
		# before the compaction: those acknowledged must stay
		plan_save "$rnext" $((RANDOM % (n - 2))) 2
		(save "$rjob" "$rnext") >"$t/save.log" 2>&1
		take_acks "$rjob" "$t/save.log" rsha
		rnext=$((rnext + 2))
		p=$(printf '%s\n' "${!rsha[@]}" | shuf -n 1)
		"$rckpt" --timeout 60 ckpt pin --job "$rjob" --step "$p" >/dev/null 2>&1 && pinned[$p]=1
		newest=" $(steps_of "$rjob" | tail -3 | tr '\n' ' ') "
		for s in "${!rsha[@]}"; do
			[ -n "${pinned[$s]:-}" ] || [ $((s % 5)) -eq 0 ] || [[ "$newest" == *" $s "* ]] || unset "rsha[$s]"
		done
	fi
	# the operation in flight, then the fault; a killed OSD is restarted at
	# once (the operation waits for it, as a client waits for a real OSD)
	case $f in
	client | osd-save | pause)
		plan_save "$next" $((RANDOM % (n - 4))) 4
		(save "$job" "$next") >"$t/save.log" 2>&1 &
		;;
	osd-comp | pause-comp) "$rckpt" --timeout 60 ckpt compact --job "$job" >"$t/op.log" 2>&1 & ;;
	osd-keep) "$rckpt" --timeout 60 ckpt compact --job "$rjob" --keep-last 3 --keep-every 5 >"$t/op.log" 2>&1 & ;;
	osd-read)
		s=$(steps_now | shuf -n 1)
		"$rckpt" --timeout 60 ckpt restore --job "$job" --step "${s:-1}" -o "$t/x.safetensors" >"$t/op.log" 2>&1 &
		;;
	esac
	pid=$!
	case $f in client | osd-save | pause) sleep "0.$((RANDOM % 60))" ;; *) sleep "0.0$((RANDOM % 10))" ;; esac
	if [ "$f" = client ]; then
		kill -9 "$pid" 2>/dev/null
	elif [ "$f" = pause ] || [ "$f" = pause-comp ]; then
		# the actor stops with whatever it had in flight; a writer takes
		# the job (for a paused writer, once its lease has lapsed) and saves
		kill -STOP "$pid" 2>/dev/null
		[ "$f" = pause ] && sleep 2.5
		last=$(steps_now | tail -1)
		plan_save $((${last:-0} + 1)) $((RANDOM % n)) 1
		if ! (save "$job" $((${last:-0} + 1))) >"$t/other.log" 2>&1; then
			reaped "run $r: the writer beside the paused $f" 1 "$t/other.log"
		fi
		take_acks "$job" "$t/other.log" sha
		kill -CONT "$pid" 2>/dev/null # its late requests go out now
	else
		kill_osd "$victim"
		restart
		[ -n "$down" ] && kill_osd "$down" # still away
	fi
	wait "$pid" 2>/dev/null
	st=$?
	ended=${EPOCHREALTIME//[!0-9]/} # (the lease of a writer that died runs from here at the latest)
	count[$f]=$((${count[$f]:-0} + 1))
	# how the operation beside the fault ended: the killed client by our
	# SIGKILL (or done before it); any other may fail, cleanly, while its
	# OSD was away (said here), but never die of a signal (counted)
	case $f in
	client) reaped "run $r: the save we killed" "$st" "$t/save.log" 137 || { [ "$st" -gt 128 ] && died=$((died + 1)); } ;;
	osd-save) ;; # said below, with its log
	pause) [ "$st" -gt 128 ] && { reaped "run $r: the paused save" "$st" "$t/save.log"; died=$((died + 1)); } ;; # it may fail (-ESTALE): it lost the job
	*) if [ "$st" -gt 128 ]; then
		reaped "run $r: the $f operation" "$st" "$t/op.log"; died=$((died + 1))
	   elif [ "$st" -ne 0 ]; then
		reaped "run $r: the $f operation (beside the killed OSD)" "$st" "$t/op.log"
	   fi ;;
	esac
	# what the writer acknowledged before the fault (the OSD's restart
	# included: a save beside it should go on)
	if [ "$f" = client ] || [ "$f" = osd-save ] || [ "$f" = pause ]; then
		take_acks "$job" "$t/save.log" sha
		if [ "$f" = osd-save ] && [ "$st" -ne 0 ]; then
			reaped "run $r: the save beside the killed OSD" "$st" "$t/save.log"
			[ "$st" -gt 128 ] && died=$((died + 1))
		fi
	fi
	if [ -n "$down" ] && [ $((r % 10)) -eq 8 ]; then
		down=""
		restart # the OSD that was away comes back
	fi
	# the next writer takes over by itself (the killed one's lease lapses)
	last=$(steps_now | tail -1)
	next=$((${last:-0} + 1))
	# a writer that died holding the lock: its lease (2 s) must lapse; 2.2 s
	# from its end, less what the checks since took
	if [ "$f" = client ] || [ "$st" -ne 0 ]; then
		left=$((ended + 2200000 - ${EPOCHREALTIME//[!0-9]/}))
		[ "$left" -le 0 ] || sleep "$(printf '%d.%06d' $((left / 1000000)) $((left % 1000000)))"
	fi
	plan_save "$next" $((RANDOM % n)) 1
	if (save "$job" "$next") >"$t/resume.log" 2>&1; then
		resumed=$((resumed + 1))
	else
		st=$?
		failed_resume=$((failed_resume + 1))
		reaped "run $r: the resuming writer" "$st" "$t/resume.log"
		[ "$st" -gt 128 ] && died=$((died + 1))
	fi
	take_acks "$job" "$t/resume.log" sha
	next=$((next + 1))
	if [ $((r % 10)) -eq 0 ]; then verify all; else verify some; fi
	if [ $((r % round)) -eq 0 ] && [ "$r" -lt "$runs" ]; then # a new job
		[ -n "$down" ] && { down=""; restart; } # (verified whole just above)
		"$rckpt" --timeout 60 ckpt verify --job "$job" >"$t/o" 2>&1 || { echo "  $job does not verify:" >&2; cat "$t/o" >&2; verify_failed=$((verify_failed + 1)); }
		"$rckpt" --timeout 60 ckpt rm --job "$job" >/dev/null 2>&1
		sha=()
		job=crash-$$-$((r / round + 1))
		plan_save 1 0 3
		(save "$job" 1) >"$t/save.log" 2>&1
		take_acks "$job" "$t/save.log" sha
		next=4
		echo "  run $r: $acked steps acknowledged, $verified restores verified, $lost lost, $changed changed so far" >&2
	fi
done
[ -n "$down" ] && restart
verify all
echo "runs $runs, osds $osds: faults $(for f in "${faults_all[@]}"; do printf '%s=%s ' "$f" "${count[$f]:-0}"; done)"
echo "steps acknowledged $acked, restores verified $verified, steps lost $lost, changed $changed, not their source $wrong, writers resumed $resumed/$runs, tools died of a signal $died"
check "no acknowledged step lost" test "$lost" -eq 0
check "every acknowledged step restored its source checkpoint" test "$wrong" -eq 0
check "  and later always the same bytes" test "$changed" -eq 0
check "the next writer always resumes" test "$failed_resume" -eq 0
check "no tool died of a signal (but the client we killed)" test "$died" -eq 0
check "steps were acknowledged and verified" test "$acked" -gt 0 -a "$verified" -gt 0
pins_kept() {
	local s listed
	listed=" $(steps_of "$rjob" | tr '\n' ' ') "
	for s in "${!pinned[@]}"; do [[ "$listed" == *" $s "* ]] || return 1; done
}
check "the retention job kept its pinned steps" pins_kept
check "every earlier job verified" test "$verify_failed" -eq 0
check "the job verifies" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$job"
check "the retention job verifies" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$rjob"
finish
