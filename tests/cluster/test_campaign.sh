#!/usr/bin/env bash
# test_campaign.sh RCKPT [--seconds S] [--keep] — a takeover campaign on one
# job, in the cluster named by CEPH_CONF, for S seconds (default 60, or
# $RCKPT_CAMPAIGN_SECONDS; the long run is 1800: docs/reliability.md).
#
# Everything a job meets at once, each actor a loop of real `rckpt`
# commands:
#
#   writers A, B  save runs of 2-5 steps, 1-3 s apart (a quarter of the runs --exact),
#                 each run taking the job over (--takeover), waiting for it
#                 (--wait 4: a paused writer's lease, 2 s, lapses) or
#                 neither (auto: only an exited writer's job is taken);
#                 step numbers never repeat, so a step names its bytes
#   operator      compaction under a retention policy (--keep-last 8
#                 --keep-every 5), gc, rewind (taking the job over, some
#                 keeping a branch), branch to a new job and restore it
#   chaos         every second or two SIGKILLs one of them, or SIGSTOPs it
#                 past the lease and lets it go on (its late requests must
#                 change nothing)
#   reader        restores each step at once as a writer prints it
#                 committed (the acknowledgement, flushed line by line), and
#                 again later at random
#
# The oracle is the acknowledgement: an acknowledged step's first restore
# is its source checkpoint (tests/close_to_source.py; an exact step's bytes
# are the file's) with its attached state (half the sources have a
# MODEL.state of random bytes), every later one the same bytes; a restore
# that fails while the step is listed (then or at the end) is a failure,
# as is one that fails for another reason than the step having gone; a
# step no longer listed is lost unless a compaction that ran after it was
# saved could drop it (not a multiple of 5, and 8 newer steps listed just
# before or after that compaction) or a rewind below it ran since. Prints
# what each actor did and those counts, which must be 0; the job must then
# verify deep. Exit 77 (skipped) without a cluster or the real checkpoints.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
shift
secs=${RCKPT_CAMPAIGN_SECONDS:-60}
keep=0
while [ $# -gt 0 ]; do
	case "$1" in
	--seconds) secs=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "test_campaign.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
need_cluster
need_real_checkpoints
here=$(cd "$(dirname "$0")" && pwd)
t=$(mktemp -d)
job=camp-$$-$RANDOM
L=8 M=5 # the retention policy
actors=()
cleanup() {
	local p b
	[ ${#actors[@]} -gt 0 ] && kill "${actors[@]}" 2>/dev/null
	for p in "$t"/pid.*; do [ -f "$p" ] && kill -CONT "$(cat "$p")" 2>/dev/null; done
	for b in $(cat "$t/branches" 2>/dev/null) "$job"; do "$rckpt" ckpt rm --job "$b" >/dev/null 2>&1; done
	[ "$keep" = 1 ] && echo "kept $t" || rm -rf "$t"
}
trap cleanup EXIT
# the checkpoints (and their gradients' files), half with an attached state
mkdir "$t/ck"
cp "$RCKPT_TEST_CKPT_DIR"/step-*.safetensors "$t/ck/" || exit 1
mapfile -t ckpts < <(model_files "$t/ck")
n=${#ckpts[@]}
for ((k = 0; k < n; k += 2)); do head -c $((100 + RANDOM)) /dev/urandom >"${ckpts[k]%.safetensors}.state"; done
end=$(($(date +%s) + secs))
now() { date +%s.%N; }
running() { [ "$(date +%s)" -lt "$end" ]; }
echo 1 >"$t/next"
mkdir "$t/old"
touch "$t/plan" "$t/events" "$t/rewinds" "$t/compactions" "$t/exits" "$t/branches"
# alloc K: the first of K step numbers no run had
alloc() { (flock 9; a=$(cat "$t/next"); echo $((a + $1)) >"$t/next"; echo "$a") 9>"$t/next.lock"; }
event() { echo "$*" >>"$t/events"; }
# listed: the job's committed steps; fails when `ckpt ls` does, 3 times
listed() {
	local k out
	for k in 1 2 3; do
		if out=$("$rckpt" --timeout 30 ckpt ls --job "$job" 2>/dev/null); then
			awk '$1 ~ /^[0-9]+$/ && $2 !~ /^steps?,/ {print $1}' <<<"$out"
			return 0
		fi
		sleep 0.3
	done
	return 1
}
# run NAME CMD...: CMD in the background, its pid where chaos finds it; its exit status noted
run() {
	local name=$1 st
	shift
	"$@" &
	echo $! >"$t/pid.$name"
	wait $!
	st=$?
	rm -f "$t/pid.$name"
	echo "$name $st ${5:-}" >>"$t/exits"
	return $st
}

writer() {
	local w=$1 i=0 k first j f mode opt
	while running; do
		sleep "$((1 + RANDOM % 2)).$((RANDOM % 10))" # a trainer's steps between saves
		i=$((i + 1)) k=$((2 + RANDOM % 4))
		first=$(alloc $k)
		mode=lossy
		[ $((RANDOM % 4)) -eq 0 ] && mode=exact
		local files=()
		for ((j = 0; j < k; j++)); do
			f=${ckpts[RANDOM % n]}
			files+=("$f")
			echo "$((first + j)) $f $mode $(now)" >>"$t/plan"
		done
		case $((RANDOM % 3)) in 0) opt=(--takeover) ;; 1) opt=(--wait 4) ;; *) opt=() ;; esac
		[ $mode = exact ] && opt+=(--exact)
		run "$w" "$rckpt" --timeout 30 ckpt save --job "$job" --lease 2 --step "$first" "${opt[@]}" \
			"${files[@]}" >"$t/w.$w.$i.log" 2>&1
		mv "$t/w.$w.$i.log" "$t/fin.$w.$i.log" # (the reader reads it once more, then files it)
	done
	return 0
}

operator() {
	local i=0 r s b start st
	while running; do
		i=$((i + 1))
		sleep "0.$((RANDOM % 10))"
		case $((RANDOM % 10)) in
		[0-4]) # what it could drop: the steps listed just before and after it
			listed >"$t/cb.$i"
			start=$(now)
			run op "$rckpt" --timeout 30 ckpt compact --job "$job" --keep-last $L --keep-every $M >"$t/op.log" 2>&1
			listed >"$t/ca.$i"
			echo "$i $start $(now)" >>"$t/compactions"
			;;
		5) if [ $((RANDOM % 2)) -eq 0 ]; then run op "$rckpt" --timeout 30 ckpt gc --job "$job" --takeover >"$t/op.log" 2>&1
		   else run op "$rckpt" --timeout 30 ckpt gc --job "$job" --wait 3 >"$t/op.log" 2>&1; fi ;;
		6) # rewind a few steps back (forgets what follows: the oracle allows it)
			r=$(listed | tail -4 | head -1) # (a pinned step's, none here, would be refused)
			[ -n "$r" ] || continue
			b=()
			[ $((RANDOM % 2)) -eq 0 ] && b=(--branch "r$i") && echo "$job.r$i" >>"$t/branches"
			start=$(now)
			run op "$rckpt" --timeout 30 ckpt rewind --job "$job" --step "$r" --takeover "${b[@]}" >"$t/op.log" 2>&1
			st=$?
			echo "$r $start $(now) $st" >>"$t/rewinds"
			;;
		*) # branch an acknowledged step into a job of its own: the same bytes
			s=$(awk '$1 == "sha" {print $2}' "$t/events" | shuf -n 1)
			[ -n "$s" ] || continue
			echo "$job-b$i" >>"$t/branches"
			if run op "$rckpt" --timeout 30 ckpt branch --job "$job" --step "$s" --to "$job-b$i" >"$t/op.log" 2>&1; then
				if "$rckpt" --timeout 30 ckpt restore --job "$job-b$i" --step "$s" -o "$t/b.safetensors" >"$t/br.log" 2>&1; then
					if [ "$(sha "$t/b.safetensors")" = "$(awk -v s="$s" '$1 == "sha" && $2 == s {print $3}' "$t/events" | head -1)" ] &&
						same_state "$s" "$t/b.state"; then
						event branched "$s"
					else
						event wrong "$s" "its branch restores to other bytes"
					fi
				else
					event wrong "$s" "its branch $job-b$i does not restore: $(tail -1 "$t/br.log")"
				fi
			fi
			"$rckpt" ckpt rm --job "$job-b$i" >/dev/null 2>&1
			;;
		esac
	done
	return 0
}

chaos() {
	local v p c
	while running; do
		sleep "1.$((RANDOM % 10))"
		v=$(ls "$t" | sed -n 's/^pid\.//p' | shuf -n 1) # an actor in a run now
		p=$(cat "$t/pid.$v" 2>/dev/null) || continue
		# ended meanwhile (or, were its pid reused, not an actor's run: a restore)
		c=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || continue
		[[ "$c" == *"--job $job "* && "$c" != *" restore "* ]] || continue
		[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] && continue
		if [ $((RANDOM % 2)) -eq 0 ]; then
			kill -KILL "$p" 2>/dev/null && event kill "$v"
		else
			kill -STOP "$p" 2>/dev/null && event stop "$v"
			sleep 2.5
			kill -CONT "$p" 2>/dev/null
		fi
	done
	return 0
}

# same_state S STATE: the state restored beside step S is its source's (or none)
same_state() {
	local f
	f=$(awk -v s="$1" '$1 == s {print $2}' "$t/plan" | tail -1)
	if [ -f "${f%.safetensors}.state" ]; then cmp -s "${f%.safetensors}.state" "$2"; else [ ! -e "$2" ]; fi
}
# judge S RESTORED: an acknowledged step's first restore against its source
judge() {
	local s=$1 f mode
	read -r _ f mode _ < <(awk -v s="$s" '$1 == s' "$t/plan" | tail -1)
	if [ "$mode" = exact ]; then
		[ "$(sha "$2")" = "$(sha "$f")" ] || { echo "not the source's SHA-256 (an exact step)" >"$t/cts.log"; return 1; }
	else
		/usr/bin/python3 "$here/../close_to_source.py" "$f" "$2" >"$t/cts.log" 2>&1 || return 1
	fi
	same_state "$s" "${2%.safetensors}.state" || { echo "its attached state is not the source's" >"$t/cts.log"; return 1; }
}
# restored S: restores step S into $t/r.safetensors; a failure is noted:
# gone (no longer listed, and the restore said the step had gone) or failed
restored() {
	local l
	"$rckpt" --timeout 30 ckpt restore --job "$job" --step "$1" -o "$t/r.safetensors" >"$t/rd.log" 2>&1 && return 0
	if ! l=$(listed); then
		event gone "$1" "(not listed: ls failed) $(tail -1 "$t/rd.log")" # judged at the end
	elif grep -qx "$1" <<<"$l"; then
		event failed "$1" "$(tail -1 "$t/rd.log")"
	elif grep -qE "was dropped while it was restored|has no step|has no committed step" "$t/rd.log"; then
		event gone "$1" "$(tail -1 "$t/rd.log")"
	else
		event failed "$1" "no longer listed, but the restore says: $(tail -1 "$t/rd.log")"
	fi
	return 1
}

reader() {
	local -A seen shas
	local s h idle log fin
	while :; do
		fin=0
		[ -f "$t/done" ] && fin=1 # (then one more pass that finds nothing new)
		idle=1
		# the runs going on, and those that ended (read once more, then filed away)
		for s in $({
			cat "$t"/w.*.log
			for log in "$t"/fin.*.log; do cat "$log" && mv "$log" "$t/old/"; done
		} 2>/dev/null | awk '$1 == "step" && $2 ~ /^[0-9]+$/ {print $2}'); do
			[ -n "${seen[$s]:-}" ] && continue
			seen[$s]=1 idle=0
			event ack "$s"
			restored "$s" || continue
			if judge "$s" "$t/r.safetensors"; then
				h=$(sha "$t/r.safetensors")
				shas[$s]=$h
				event sha "$s" "$h"
			else
				event wrong "$s" "restores to something other than its source: $(head -1 "$t/cts.log")"
			fi
		done
		if [ $idle = 1 ]; then
			[ $fin = 1 ] && break
			s=$(printf '%s\n' "${!shas[@]}" | shuf -n 1)
			if [ -n "$s" ] && restored "$s"; then
				[ "$(sha "$t/r.safetensors")" = "${shas[$s]}" ] && same_state "$s" "$t/r.state" && event again "$s" || event changed "$s"
			fi
			sleep 0.2
		fi
	done
	return 0
}

echo "campaign on job $job for $secs s ..."
reader &
rpid=$!
writer A &
actors+=($!)
writer B &
actors+=($!)
operator &
actors+=($!)
chaos &
actors+=($!)
actors_died=0
for p in "${actors[@]}"; do wait "$p" || actors_died=$((actors_died + 1)); done
actors=("$rpid")
touch "$t/done"
wait "$rpid" || actors_died=$((actors_died + 1))
actors=()

# The end: every acknowledged step no longer listed, and every restore
# said gone though the step is listed now (step numbers never repeat).
listed >"$t/final" || { sleep 5 && listed >"$t/final"; } || { echo "cannot list the job at the end" >&2; exit 1; }
read -r lost dropped forgot gone_listed < <(/usr/bin/python3 - "$t" $L $M <<'PY'
import glob, os, sys
t, L, M = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = lambda path: {int(x) for x in open(path).read().split()} if os.path.exists(path) else set()
final = steps(f"{t}/final")
started = {}
for line in open(f"{t}/plan"):
    s, _, _, t0 = line.split()
    started[int(s)] = float(t0)
events = [l.split() for l in open(f"{t}/events")]
acked = sorted({int(e[1]) for e in events if e[0] == "ack"})
gone = {int(e[1]) for e in events if e[0] == "gone"}
rewinds = [l.split() for l in open(f"{t}/rewinds")]  # R start end status
comps = []
for l in open(f"{t}/compactions"):
    i, c0, c1 = l.split()
    comps.append((float(c1), steps(f"{t}/cb.{i}") | steps(f"{t}/ca.{i}")))
lost = dropped = forgot = 0
for s in acked:
    if s in final:
        continue
    t0 = started[s]
    if any(int(r) < s and float(e) >= t0 and st in ("0", "137") for r, _, e, st in rewinds):
        forgot += 1
    elif s % M and any(c1 >= t0 and sum(1 for x in seen if x > s) >= L for c1, seen in comps):
        dropped += 1
    else:
        lost += 1
        print(f"  step {s}: acknowledged, and LOST", file=sys.stderr)
gone_listed = len(gone & final)
for s in sorted(gone & final):
    print(f"  step {s}: a restore failed as if it had gone, yet it is listed", file=sys.stderr)
print(lost, dropped, forgot, gone_listed)
PY
)
count() { awk -v k="$1" '$1 == k' "$t/events" | wc -l; }
exits() { awk -v w="$1" -v st="$2" '$1 ~ w && $2 == st' "$t/exits" | wc -l; }
died=$(awk '$2 > 128 && $2 != 137' "$t/exits" | wc -l)
misused=$(awk '$2 == 2' "$t/exits" | wc -l)
wrong=$(count wrong) failed=$(($(count failed) + ${gone_listed:-1})) changed=$(count changed)
echo "writers: $(exits '^[AB]$' 0) runs ended 0, $(exits '^[AB]$' 1) failed cleanly, $(exits '^[AB]$' 137) killed; operator: $(exits op 0) ended 0, $(exits op 1) failed cleanly, $(exits op 137) killed"
echo "chaos: $(count kill) SIGKILLs, $(count stop) SIGSTOPs past the lease; rewinds $(wc -l <"$t/rewinds"), branches restored $(count branched)"
echo "steps: $(count ack) acknowledged, $(count sha) restored at once to their source, $(count again) restored again to the same bytes;" \
	"$dropped dropped by retention and $forgot forgotten by rewinds as they allow, $(count gone) restores of such a step refused"
echo "lost $lost, wrong $wrong, changed $changed, failed restores of a listed step $failed, tools that died of a signal not sent $died"
awk '$1 == "wrong" || $1 == "failed" || $1 == "changed"' "$t/events" | head -20 | sed 's/^/  /' >&2
check "no acknowledged step lost" test "${lost:-1}" -eq 0
check "every acknowledged step restored at once to its source" test "$wrong" -eq 0
check "  and later to the same bytes" test "$changed" -eq 0
check "no restore of a listed step failed" test "$failed" -eq 0
check "no tool died of a signal the campaign did not send, none was misused" test "$died" -eq 0 -a "$misused" -eq 0
check "every actor ran to its end" test "$actors_died" -eq 0
check "steps were acknowledged and restored, chaos struck" test "$(count sha)" -gt 0 -a "$(count kill)" -gt 0
check "gc, then the job verifies deep" expect_run 0 "$t/o" sh -c "'$rckpt' ckpt gc --job '$job' --takeover && '$rckpt' ckpt verify --job '$job' --deep"
finish
