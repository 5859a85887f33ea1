#!/usr/bin/env bash
# test_ckpt_store.sh RCKPT — checkpoints in the cluster named by CEPH_CONF:
# a real sequence of 30+ steps saved and every step restored bit-exactly
# (against the codec's own local decode, and against its source checkpoint
# by tests/close_to_source.py, which shares no code with the decoder);
# compaction under a retention
# policy, then every kept step restored bit-exactly, alone and beside a
# running writer; partial restore; the second writer refused; a damaged
# record failing closed; writers killed with SIGKILL at random points
# always leaving the head and every step they acknowledged restorable,
# to the same bytes; gc and rm. Exit 77
# (skipped) without a cluster or without the real checkpoints.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
need_real_checkpoints
src=$RCKPT_TEST_CKPT_DIR
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cts() { /usr/bin/python3 "$(dirname "$0")/../close_to_source.py" "$@"; }
job=store-$$-$RANDOM
mapfile -t ckpts < <(model_files "$src")
n=${#ckpts[@]}

check "30+ real checkpoints" test "$n" -ge 30
check "save the sequence" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[@]}"
check "  reports every step" test "$(grep -c '^step ' "$t/o")" -eq "$n"
check "  the first is a base, the rest deltas" test "$(grep -c '^step .* delta ' "$t/o")" -eq $((n - 1))
check "ls lists them" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$job"
check "  all committed" contains "$t/o" "$n steps"

# The codec's own chain, decoded locally at every step.
mkdir -p "$t/enc"
"$rckpt" codec encode -o "$t/enc" "${ckpts[@]}" >/dev/null || echo "codec encode failed" >&2
mapfile -t steps < <(ls "$t/enc"/*.rckpt | sort)
bad=0
all=() pairs=()
for ((i = 0; i < n; i++)); do
	s=$(stepof "${ckpts[$i]}")
	"$rckpt" codec decode -o "$t/want.safetensors" "${steps[@]:0:$((i + 1))}" >/dev/null &&
		"$rckpt" ckpt restore --job "$job" --step "$s" -o "$t/got-$s.safetensors" >"$t/r" &&
		cmp -s "$t/want.safetensors" "$t/got-$s.safetensors" || { bad=$((bad + 1)); echo "  step $s differs" >&2; }
	pairs+=("${ckpts[$i]}" "$t/got-$s.safetensors")
	cp "$t/want.safetensors" "$t/want-$s.safetensors"
	all+=("$s")
done
check "every committed step restores bit-exactly" test "$bad" -eq 0
# every pair in one run (Python and numpy start once, not n times)
check "  and is its source checkpoint, within eps" cts "${pairs[@]}"
check "restore without --step gives the latest" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/latest.safetensors"
check "  which is the last step" cmp -s "$t/latest.safetensors" "$t/got-${all[$((n - 1))]}.safetensors"
check "a step never committed: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job" --step 999999999 -o "$t/x.safetensors"
check "  says so" contains "$t/o" "no committed step"

# restore_all JOB STEP... : how many of the steps do not restore bit-exactly
# (in pool $rpool when set)
restore_all() {
	local j=$1 s b=0
	shift
	for s in "$@"; do
		"$rckpt" ${rpool:+--pool "$rpool"} ckpt restore --job "$j" --step "$s" -o "$t/got.safetensors" >/dev/null 2>&1 &&
			cmp -s "$t/want-$s.safetensors" "$t/got.safetensors" || { b=$((b + 1)); echo "  step $s differs" >&2; }
	done
	echo "$b"
}
# chunk_bytes FILE: the "chunks A -> B bytes" of a compact report, as "A B"
chunk_bytes() { sed -n 's/.*chunks \([0-9]*\) -> \([0-9]*\) bytes.*/\1 \2/p' "$1"; }

# Partial restore: one tensor, from only the chunks that hold it (a job cut
# into small chunks, so that there are several).
pjob=part-$$-$RANDOM
tname=$(/usr/bin/python3 - "${ckpts[0]}" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])
h.pop('__metadata__', None)
print(min(h, key=lambda k: h[k]['data_offsets'][1] - h[k]['data_offsets'][0]))
PY
)
"$rckpt" ckpt save --job "$pjob" --chunk-params 8192 "${ckpts[@]:0:3}" >/dev/null
check "restore a job of small chunks" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$pjob" -o "$t/full.safetensors"
fullcalls=$(sed -n 's/.*tensors\{0,1\}, \([0-9]*\) materialize calls.*/\1/p' "$t/o")
check "restore --tensors $tname" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$pjob" --tensors "$tname" -o "$t/part.safetensors"
partcalls=$(sed -n 's/.*tensors\{0,1\}, \([0-9]*\) materialize calls.*/\1/p' "$t/o")
check "  one tensor" contains "$t/o" ": 1 tensor,"
check "  from fewer chunks ($partcalls of $fullcalls calls)" test "$partcalls" -lt "$fullcalls"
check "  the same bytes as in the full restore" /usr/bin/python3 - "$t/part.safetensors" "$t/full.safetensors" "$tname" <<'PY'
import json, struct, sys
def tensor(path, name):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    a, e = h[name]['data_offsets']
    return b[8 + n + a:8 + n + e]
sys.exit(0 if tensor(sys.argv[1], sys.argv[3]) == tensor(sys.argv[2], sys.argv[3]) else 1)
PY
check "  an unknown tensor: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$pjob" --tensors no.such -o "$t/x.safetensors"
check "  naming it" contains "$t/o" "no tensor 'no.such'"

# Compaction under a policy: the last 5 and every 100th step (and the head).
keep=()
for ((i = 0; i < n; i++)); do
	s=${all[$i]}
	if [ $((n - i)) -le 5 ] || [ $((s % 100)) -eq 0 ]; then keep+=("$s"); else gone=$s; fi
done
check "compact --keep-last 5 --keep-every 100" expect_run 0 "$t/o" "$rckpt" ckpt compact --job "$job" --keep-last 5 --keep-every 100
check "  keeps ${#keep[@]} of $n steps" contains "$t/o" "$n -> ${#keep[@]} steps"
read -r b0 b1 < <(chunk_bytes "$t/o")
check "  and stores less" test "$b1" -lt "$b0"
check "every kept step restores bit-exactly" test "$(restore_all "$job" "${keep[@]}")" -eq 0
check "a dropped step: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job" --step "$gone" -o "$t/x.safetensors"
check "  says it is gone" contains "$t/o" "dropped"
check "compact again" expect_run 0 "$t/o" "$rckpt" ckpt compact --job "$job"
read -r c0 c1 < <(chunk_bytes "$t/o")
check "  changes nothing" test "$c0" -eq "$b1" -a "$c1" -eq "$b1"
check "verify: all records intact" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$job"
check "  ${#keep[@]} steps checked" contains "$t/o" "${#keep[@]} steps"
check "ls after compaction" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$job"
check "  shows the stored policy" contains "$t/o" "policy: keep the last 5 steps and the multiples of 100"
# the same as JSON (issue 30 item 4; schema: docs/operations.md, "JSON output")
check "ls --format json" expect_run 0 "$t/o.json" "$rckpt" ckpt ls --job "$job" --format json
check "  the same steps, policy and bytes" /usr/bin/python3 - "$t/o.json" "$t/o" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
steps = [int(l.split()[0]) for l in text.splitlines() if re.match(r"^\d+ +(base|delta) ", l)]
assert [s["step"] for s in j["steps"]] == steps, (j["steps"], steps)
assert j["policy"] == {"keep_last": 5, "keep_every": 100}, j["policy"]
assert "stored now: %d bytes" % j["stored_bytes"] in text
PY
check "verify --format json-pretty" expect_run 0 "$t/o.json" "$rckpt" ckpt verify --job "$job" --format json-pretty
check "  ok, nothing bad" /usr/bin/python3 -c "
import json; v = json.load(open('$t/o.json')); assert v['ok'] and v['bad'] == 0 and v['steps'] == ${#keep[@]}, v"
stored=$(sed -n 's/^stored now: \([0-9]*\) bytes.*/\1/p' "$t/o")
check "  and what it stores now: the compacted chunks and ${#keep[@]} manifests" \
	test "${stored:-0}" -gt "$b1" -a "$(grep -c "objects" "$t/o")" -eq 1
check "pin a step" expect_run 0 "$t/o" "$rckpt" ckpt pin --job "$job" --step "${keep[0]}"
check "rm --step of a pinned step: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt rm --job "$job" --step "${keep[0]}"
check "rm --step of the head: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt rm --job "$job" --step "${keep[${#keep[@]}-1]}"
check "rm --step of another kept step" expect_run 0 "$t/o" "$rckpt" ckpt rm --job "$job" --step "${keep[1]}"

# Compaction beside a running writer: the whole sequence stays restorable.
# In a pool of its own, so that `compact --all` sees only this run's jobs.
cpool=rckpt-test-$$
ceph osd pool create "$cpool" 8 8 replicated --size 1 >/dev/null 2>&1 ||
	ceph osd pool create "$cpool" 8 8 replicated >/dev/null 2>&1
ceph osd pool application enable "$cpool" rckpt >/dev/null 2>&1
trap 'rm -rf "$t"; ceph osd pool rm "$cpool" "$cpool" --yes-i-really-really-mean-it >/dev/null 2>&1' EXIT
crckpt() { "$rckpt" --pool "$cpool" "$@"; }
# The writer of a fast machine may be done before a compaction starts: a
# fresh job again (at most 5 tries) until two ran beside it.
cbad=0
for ((try = 0; try < 5; try++)); do
	cjob=compact-$$-$RANDOM
	crckpt ckpt save --job "$cjob" "${ckpts[@]}" >"$t/cw" 2>&1 &
	wpid=$!
	# compaction of a job that does not exist yet fails (a typo must):
	# start once the writer has made it
	for ((i = 0; i < 1500; i++)); do
		crckpt ckpt ls --job "$cjob" >/dev/null 2>&1 && break
		sleep 0.02
	done
	runs=0
	while kill -0 "$wpid" 2>/dev/null && [ "$runs" -lt 200 ]; do
		crckpt compact --job "$cjob" >"$t/co" 2>&1 || { cbad=$((cbad + 1)); cat "$t/co" >&2; }
		runs=$((runs + 1))
	done
	wait "$wpid"
	wrc=$?
	[ "$wrc" -ne 0 ] || [ "$runs" -ge 2 ] && break
	[ "$try" -lt 4 ] && crckpt ckpt rm --job "$cjob" >/dev/null 2>&1 # compact --all counts the jobs
done
reaped "the writer beside the compactions" "$wrc" "$t/cw"
check "the writer saved beside $runs compactions (try $((try + 1)))" test "$wrc" -eq 0 -a "$runs" -ge 2
check "  every compaction succeeded" test "$cbad" -eq 0
check "  and every step restores bit-exactly" test "$(rpool=$cpool restore_all "$cjob" "${all[@]}")" -eq 0
crckpt ckpt save --job "$cjob-2" "${ckpts[@]:0:3}" >/dev/null 2>&1
check "compact --all: every job of the pool" expect_run 0 "$t/o" "$rckpt" --pool "$cpool" compact --all
check "  names both jobs" contains "$t/o" "job $cjob: ${#ckpts[@]} -> ${#ckpts[@]} steps"
check "  (the second too)" contains "$t/o" "job $cjob-2: 3 -> 3 steps"
check "  and sums up" contains "$t/o" "compacted 2 of 2 job(s)"
check "  then the latest still restores" test "$(rpool=$cpool restore_all "$cjob" "${all[$((n - 1))]}")" -eq 0

# A second writer: hold the job's lock as another client would. The lock
# is held long enough that no pace of this machine races it; the intruder
# then goes (its lock broken, as an operator would), and writing goes on.
rados -p rckpt -N "$job" lock get rckpt.job rckpt.writer --lock-cookie intruder --lock-duration 600 >/dev/null 2>&1
check "second writer refused: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt save --job "$job" --step 99999999 "${ckpts[0]}"
check "  names the reason" contains "$t/o" "another writer"
who=$(rados -p rckpt -N "$job" lock info rckpt.job rckpt.writer | jq -r '.lockers[] | select(.cookie == "intruder") | .name')
check "  the intruder's lock broken" rados -p rckpt -N "$job" lock break rckpt.job rckpt.writer "$who" --lock-cookie intruder
check "  then writing goes on" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" --step 99999998 "${ckpts[0]}"
# A lease that ran out: whatever this machine's pace, after the sleep it has.
rados -p rckpt -N "$job" lock get rckpt.job rckpt.writer --lock-cookie intruder --lock-duration 2 >/dev/null 2>&1
sleep 2.5
check "  once a lease ends, writing goes on" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" --step 99999999 "${ckpts[0]}"

# SIGKILL a writer at random points (4 steps a save). Every step a writer
# acknowledged (its "step N" line) must stay listed and restore: to its
# source checkpoint (within eps; the newest of each save at once, all at the
# end), and later always to the same bytes; the head must restore, and the
# next writer take over (the lease is 1 s).
kjob=kill-$$-$RANDOM
declare -A ksrc ksha
first_restore() { # STEP: restore it, check it against its source, keep its SHA
	if "$rckpt" ckpt restore --job "$kjob" --step "$1" -o "$t/k.safetensors" >/dev/null 2>&1 &&
		cts "${ksrc[$1]}" "$t/k.safetensors"; then
		ksha[$1]=$(sha256sum <"$t/k.safetensors")
	else
		ksha[$1]=bad
		echo "  step $1: acknowledged, but does not restore to ${ksrc[$1]##*/}" >&2
	fi
}
ack() { # LOG FIRST FILE...: note the acknowledged steps and their sources
	local log=$1 first=$2 s i=0 newest=
	shift 2
	for f in "$@"; do ksrc[$((first + i))]=$f; i=$((i + 1)); done
	for s in $(awk '$1 == "step" && $2 ~ /^[0-9]+$/ {print $2}' "$log"); do
		[ -n "${ksha[$s]:-}" ] || ksha[$s]=pending
		newest=$s
	done
	[ -z "$newest" ] || [ "${ksha[$newest]}" != pending ] || first_restore "$newest"
}
kept() { # all|some: every acknowledged step listed; all (or 1 in 8) restored
	local s listed
	listed=" $("$rckpt" ckpt ls --job "$kjob" | awk '$1 ~ /^[0-9]+$/ {print $1}' | tr '\n' ' ') "
	for s in "${!ksha[@]}"; do
		[[ "$listed" == *" $s "* ]] || { echo "  step $s: acknowledged, and not listed" >&2; return 1; }
		[ "$1" = all ] || [ $((RANDOM % 8)) -eq 0 ] || continue
		case ${ksha[$s]} in
		bad) ;;
		pending) first_restore "$s" ;;
		*)	"$rckpt" ckpt restore --job "$kjob" --step "$s" -o "$t/k.safetensors" >/dev/null 2>&1 &&
				[ "$(sha256sum <"$t/k.safetensors")" = "${ksha[$s]}" ] ||
				{ echo "  step $s: restores to other bytes" >&2; return 1; } ;;
		esac
	done
}
"$rckpt" ckpt save --job "$kjob" --lease 1 --step 1 "${ckpts[0]}" >"$t/ks" 2>&1
ack "$t/ks" 1 "${ckpts[0]}"
okrestore=0 okresume=0 okkept=0 oddexit=0
last=1
for ((k = 0; k < 20; k++)); do
	"$rckpt" ckpt save --job "$kjob" --lease 1 --step $((last + 1)) "${ckpts[@]:1:4}" >"$t/ks" 2>&1 &
	pid=$!
	sleep "0.$((RANDOM % 40))"
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	reaped "the writer of run $k" $? "$t/ks" 137 || oddexit=$((oddexit + 1))
	killed=${EPOCHREALTIME//[!0-9]/}
	ack "$t/ks" $((last + 1)) "${ckpts[@]:1:4}"
	# reads need no lease: the head and the acknowledged steps are checked
	# while the killed writer's lease still runs; then the rest of 1.2 s
	# from the kill, so that the lease (1 s) has lapsed before the next save
	"$rckpt" ckpt restore --job "$kjob" -o "$t/k.safetensors" >/dev/null 2>&1 && okrestore=$((okrestore + 1))
	kept some && okkept=$((okkept + 1))
	left=$((killed + 1200000 - ${EPOCHREALTIME//[!0-9]/}))
	[ "$left" -le 0 ] || sleep "$(printf '%d.%06d' $((left / 1000000)) $((left % 1000000)))"
	last=$("$rckpt" ckpt ls --job "$kjob" | awk '$1 ~ /^[0-9]+$/ {s=$1} END {print s}')
	"$rckpt" ckpt save --job "$kjob" --lease 1 --step $((last + 1)) "${ckpts[0]}" >"$t/ks" 2>&1 &&
		okresume=$((okresume + 1))
	ack "$t/ks" $((last + 1)) "${ckpts[0]}"
	last=$((last + 1))
done
none_bad() { local v; for v in "${ksha[@]}"; do [ "$v" != bad ] || return 1; done; }
check "after 20 SIGKILLs the head always restores" test "$okrestore" -eq 20
check "  every acknowledged step stayed listed" test "$okkept" -eq 20
check "  and all of them restore, to the same bytes" kept all
check "  each first restored to its source checkpoint" none_bad
check "  and the next writer always saves" test "$okresume" -eq 20
check "  each killed writer ended by our SIGKILL or by finishing" test "$oddexit" -eq 0
check "  and the final head restores" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$kjob" -o "$t/k.safetensors"

# gc after a killed writer; rm of a whole job.
"$rckpt" ckpt save --job "$kjob" --lease 1 --step $((last + 1)) "${ckpts[@]:1}" >/dev/null 2>&1 &
pid=$!
sleep 0.3
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "a writer killed before gc ended by our SIGKILL or by finishing" reaped "that writer" $? /dev/null 137
sleep 1.2
check "gc after a killed writer" expect_run 0 "$t/o" "$rckpt" ckpt gc --job "$kjob"
check "  then verify passes" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$kjob"
check "rm a job" expect_run 0 "$t/o" "$rckpt" ckpt rm --job "$kjob"
check "  leaves no object" test -z "$(rados -p rckpt -N "$kjob" ls 2>/dev/null)"
check "  and ls finds no job (exit 1)" expect_run 1 "$t/o" "$rckpt" ckpt ls --job "$kjob"
check "  saying so" contains "$t/o" "job $kjob does not exist"

# Damage a record in a chunk object: restore fails closed.
rados -p rckpt -N "$job" get rckpt.chunk.00000 "$t/chunk"
size=$(stat -c %s "$t/chunk")
printf '\x5a' | dd of="$t/chunk" bs=1 seek=$((size - 20)) conv=notrunc status=none
rados -p rckpt -N "$job" put rckpt.chunk.00000 "$t/chunk"
check "a damaged record: restore exits 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/x.safetensors"
check "  with a checksum error" contains "$t/o" "checksum"
check "  verify: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt verify --job "$job"
check "  naming the damage" contains "$t/o" "1 bad"
check "  and the object" contains "$t/o" "$job/rckpt.chunk.00000"
check "  restore names the object too" bash -c "'$rckpt' ckpt restore --job '$job' -o '$t/x.safetensors' 2>&1 | grep -qF 'rckpt.chunk.00000'"
check "  verify --deep: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt verify --job "$job" --deep
check "  steps that fail to materialize are counted" bash -c "grep -q 'steps materialized and checked (SHA-256), [1-9][0-9]* failed' '$t/o'"
check "  compaction refuses to touch it" expect_run 1 "$t/o" "$rckpt" ckpt compact --job "$job"

# Any flipped byte of any record, and any damaged index entry, is caught.
fjob=flip-$$
"$rckpt" ckpt save --job "$fjob" "${ckpts[@]:0:3}" >/dev/null
check "a fresh job verifies deeply" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$fjob" --deep
mapfile -t chunks < <(rados -p rckpt -N "$fjob" ls | grep '^rckpt\.chunk\.' | sort)
caught=0 flips=0
for ((k = 0; k < 24; k++)); do
	c=${chunks[$((RANDOM % ${#chunks[@]}))]}
	rados -p rckpt -N "$fjob" get "$c" "$t/orig"
	size=$(stat -c %s "$t/orig")
	[ "$size" -gt 0 ] || continue
	cp "$t/orig" "$t/bad"
	off=$(((RANDOM * 32768 + RANDOM) % size))
	byte=$(od -An -tu1 -j "$off" -N1 "$t/orig" | tr -d ' ')
	printf "\\x$(printf %02x $((byte ^ (1 << (RANDOM % 8)))))" | dd of="$t/bad" bs=1 seek="$off" conv=notrunc status=none
	rados -p rckpt -N "$fjob" put "$c" "$t/bad"
	flips=$((flips + 1))
	if ! "$rckpt" ckpt verify --job "$fjob" >"$t/o" 2>&1 && grep -qF "$fjob/$c" "$t/o"; then
		caught=$((caught + 1))
	else
		echo "  a flip at $c+$off went unnoticed" >&2
	fi
	rados -p rckpt -N "$fjob" put "$c" "$t/orig"
done
check "every flipped record byte is caught by verify, naming the object ($caught/$flips)" test "$caught" -eq "$flips"
key=$(rados -p rckpt -N "$fjob" listomapkeys "${chunks[0]}" | grep '^r\.' | head -1)
rados -p rckpt -N "$fjob" getomapval "${chunks[0]}" "$key" "$t/entry" >/dev/null 2>&1
cp "$t/entry" "$t/entry.bad"
printf '\x07' | dd of="$t/entry.bad" bs=1 seek=9 conv=notrunc status=none # the record's offset
rados -p rckpt -N "$fjob" setomapval "${chunks[0]}" "$key" <"$t/entry.bad"
check "a damaged index entry: verify exits 1" expect_run 1 "$t/o" "$rckpt" ckpt verify --job "$fjob"
check "  restore of that step fails closed" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$fjob" --step "$(stepof "${ckpts[0]}")" -o "$t/x.safetensors"
rados -p rckpt -N "$fjob" setomapval "${chunks[0]}" "$key" <"$t/entry"
check "  repaired, it verifies again" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$fjob" --deep
"$rckpt" ckpt rm --job "$fjob" >/dev/null 2>&1
# Where a save computes: RCKPT_COMPUTE (or the job option) forces either.
cjob="compute-$$"
check "RCKPT_COMPUTE=cpu saves" env RCKPT_COMPUTE=cpu "$rckpt" ckpt save --job "$cjob" "${ckpts[@]:0:2}"
check "  and verify passes" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$cjob"
check "RCKPT_COMPUTE=bogus: exit 1" expect_run 1 "$t/o" env RCKPT_COMPUTE=bogus "$rckpt" ckpt save --job "$cjob" "${ckpts[2]}"
check "  naming the variable" contains "$t/o" "RCKPT_COMPUTE is 'bogus'"
if ! nvidia-smi -L >/dev/null 2>&1; then
	check "RCKPT_COMPUTE=gpu without a GPU: exit 1" expect_run 1 "$t/o" env RCKPT_COMPUTE=gpu "$rckpt" ckpt save --job "$cjob" "${ckpts[2]}"
	check "  saying there is no GPU" contains "$t/o" "no GPU"
	check "  and nothing was committed" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$cjob"
	check "  (still 2 steps)" contains "$t/o" "2 steps"
fi
"$rckpt" ckpt rm --job "$cjob" >/dev/null 2>&1
finish
