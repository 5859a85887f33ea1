#!/usr/bin/env bash
# test_rewind.sh RCKPT — rewind and branches from the command line, in the
# cluster named by CEPH_CONF (formats/store.md "Rewind", "Branches"): real
# steps saved; a rewind that keeps what it abandons as a job of its own,
# whose steps restore to the same bytes; the main line saving on; a rewind
# refused past the head; a rewind that drops, then gc; a new job started
# from a step, saving on. Exit 77 (skipped) without a cluster or the real
# checkpoints.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
need_real_checkpoints
src=$RCKPT_TEST_CKPT_DIR
t=$(mktemp -d)
job=rw-$$-$RANDOM
trap '"$rckpt" ckpt rm --job "$job" >/dev/null 2>&1; "$rckpt" ckpt rm --job "$job.spike" >/dev/null 2>&1; "$rckpt" ckpt rm --job "$job-ft" >/dev/null 2>&1; "$rckpt" ckpt rm --job "$job-long" >/dev/null 2>&1; "$rckpt" ckpt rm --job "$job-long.b" >/dev/null 2>&1; rm -rf "$t"' EXIT
mapfile -t ckpts < <(model_files "$src" | head -n 12)
steps_of() { "$rckpt" ckpt ls --job "$1" | awk '$1 ~ /^[0-9]+$/ && $2 !~ /^steps?,/ {print $1}' | tr '\n' ' '; }

check "save 8 real steps" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[@]:0:8}"
declare -A want
for f in "${ckpts[@]:0:8}"; do
	s=$(stepof "$f")
	"$rckpt" ckpt restore --job "$job" --step "$s" -o "$t/r.safetensors" >/dev/null && want[$s]=$(sha "$t/r.safetensors")
done
s4=$(stepof "${ckpts[3]}") s2=$(stepof "${ckpts[1]}") s1=$(stepof "${ckpts[0]}") s8=$(stepof "${ckpts[7]}")
check "rewind past the head is refused" expect_run 1 "$t/o" "$rckpt" ckpt rewind --job "$job" --step $((s8 + 1))
check "  saying why" contains "$t/o" "not a committed step"
check "rewind keeping a branch" expect_run 0 "$t/o" "$rckpt" ckpt rewind --job "$job" --step "$s4" --branch spike
check "  says where it went" contains "$t/o" "kept as job $job.spike"
check "  the job ends at the step" test "$(steps_of "$job")" = "$(for f in "${ckpts[@]:0:4}"; do printf '%s ' "$(stepof "$f")"; done)"
check "  ls lists the branch" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$job"
check "    by name" contains "$t/o" "branch $job.spike: steps $s4..$s8"
check "  the branch lists where it came from" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$job.spike"
check "    the job" contains "$t/o" "branch of job $job"
bad=0
for f in "${ckpts[@]:3:5}"; do
	s=$(stepof "$f")
	"$rckpt" ckpt restore --job "$job.spike" --step "$s" -o "$t/r.safetensors" >/dev/null &&
		[ "$(sha "$t/r.safetensors")" = "${want[$s]}" ] || { bad=$((bad + 1)); echo "  step $s differs in the branch" >&2; }
done
check "every kept step restores from the branch, bit-identically" test "$bad" -eq 0
check "the main line saves on" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" --step $((s4 + 1)) "${ckpts[8]}" "${ckpts[9]}"
check "  and restores" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/r.safetensors"
check "  its latest is the new one" contains "$t/o" "restored step $((s4 + 2))"
check "rewind dropping what follows" expect_run 0 "$t/o" "$rckpt" ckpt rewind --job "$job" --step "$s2"
check "  forgotten at once" test "$(steps_of "$job")" = "$s1 $s2 "
check "  gc removes what they stored" expect_run 0 "$t/o" "$rckpt" ckpt gc --job "$job"
check "    the manifests of both abandoned lines" contains "$t/o" "removed 8 stale manifest(s)"
check "a new job from a step" expect_run 0 "$t/o" "$rckpt" ckpt branch --job "$job" --step "$s1" --to "$job-ft"
check "  restores it bit-identically" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job-ft" -o "$t/r.safetensors"
check "    the same bytes" test "$(sha "$t/r.safetensors")" = "${want[$s1]}"
check "  saves on from it" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job-ft" --step $((s1 + 1)) "${ckpts[10]}"
check "    a delta on it" contains "$t/o" " delta "
check "  refused when the job exists" expect_run 1 "$t/o" "$rckpt" ckpt branch --job "$job" --step "$s1" --to "$job-ft"

# a branch beside a compaction loop (store.md "Branches"): it completes,
# and every step it copied restores to the bytes the source's did when
# saved (records moved or re-encoded under it are looked up again; steps
# the retention policy dropped meanwhile are not copied)
long=$job-long
files=()
for ((i = 0; i < 5; i++)); do files+=("${ckpts[@]}"); done
check "save 60 steps" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$long" --step 1 "${files[@]:0:60}"
declare -A lw
for ((s = 1; s <= 60; s++)); do
	"$rckpt" ckpt restore --job "$long" --step $s -o "$t/r.safetensors" >/dev/null && lw[$s]=$(sha "$t/r.safetensors")
done
(for ((i = 0; i < 200; i++)); do
	[ -e "$t/stop" ] && break
	"$rckpt" ckpt compact --job "$long" --keep-last $((40 - i % 30)) --keep-every 4 >/dev/null 2>&1
done) &
loop=$!
check "a branch beside compactions completes" expect_run 0 "$t/o" "$rckpt" ckpt branch --job "$long" --step 1 --upto 60 --to "$long.b"
touch "$t/stop"
wait $loop
bad=0 n=0
for s in $(steps_of "$long.b"); do
	n=$((n + 1))
	"$rckpt" ckpt restore --job "$long.b" --step "$s" -o "$t/r.safetensors" >/dev/null &&
		[ "$(sha "$t/r.safetensors")" = "${lw[$s]}" ] || bad=$((bad + 1))
done
check "  it copied steps ($n)" test "$n" -gt 0
check "  each restores to the bytes saved" test "$bad" -eq 0
"$rckpt" ckpt rm --job "$long" >/dev/null 2>&1
"$rckpt" ckpt rm --job "$long.b" >/dev/null 2>&1
finish
