#!/usr/bin/env bash
# test_ckpt_store.sh RCKPT — checkpoints in the cluster named by CEPH_CONF:
# a real sequence of 30+ steps saved and every step restored bit-exactly
# (against the codec's own local decode), the second writer refused, a
# damaged record failing closed, and writers killed with SIGKILL at random
# points always leaving the head restorable for the next. Exit 77
# (skipped) without a cluster or without the real checkpoints.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
if [ -z "${CEPH_CONF:-}" ]; then
	echo "skipped: no cluster (CEPH_CONF is not set; ./dev.sh test starts one)"
	[ "${RCKPT_REQUIRE_CLUSTER:-0}" = 1 ] && exit 1
	exit 77
fi
src=${RCKPT_TEST_CKPT_DIR:-}
if [ -z "$src" ] || ! ls "$src"/step-*.safetensors >/dev/null 2>&1; then
	echo "skipped: no real checkpoints (the make_test_checkpoints fixture)"
	exit 77
fi
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
job=store-$$-$RANDOM
mapfile -t ckpts < <(ls "$src"/step-*.safetensors | grep -v '\.grads\.' | sort)
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
for ((i = 0; i < n; i++)); do
	s=$(basename "${ckpts[$i]}" .safetensors | sed 's/[^0-9]//g; s/^0*//')
	"$rckpt" codec decode -o "$t/want.safetensors" "${steps[@]:0:$((i + 1))}" >/dev/null &&
		"$rckpt" ckpt restore --job "$job" --step "$s" -o "$t/got.safetensors" >"$t/r" &&
		cmp -s "$t/want.safetensors" "$t/got.safetensors" || { bad=$((bad + 1)); echo "  step $s differs" >&2; }
done
check "every committed step restores bit-exactly" test "$bad" -eq 0
check "restore without --step gives the latest" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/latest.safetensors"
check "  which is the last step" cmp -s "$t/latest.safetensors" "$t/got.safetensors"
check "a step never committed: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job" --step 999999999 -o "$t/x.safetensors"
check "  says so" contains "$t/o" "no committed step"

# A second writer: hold the job's lock as another client would.
rados -p rckpt -N "$job" lock get rckpt.job rckpt.writer --lock-cookie intruder --lock-duration 3 >/dev/null 2>&1
check "second writer refused: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt save --job "$job" --step 99999999 "${ckpts[0]}"
check "  names the reason" contains "$t/o" "another writer"
sleep 3.5
check "  once the lease ends, writing goes on" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" --step 99999999 "${ckpts[0]}"

# SIGKILL a writer at random points; the head must stay restorable and the
# next writer must take over (the lease is 1 s).
kjob=kill-$$-$RANDOM
"$rckpt" ckpt save --job "$kjob" --lease 1 --step 1 "${ckpts[0]}" >/dev/null
okrestore=0
okresume=0
last=1
for ((k = 0; k < 20; k++)); do
	"$rckpt" ckpt save --job "$kjob" --lease 1 --step $((last + 1)) "${ckpts[@]:1}" >/dev/null 2>&1 &
	pid=$!
	sleep "0.$((RANDOM % 40))"
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	sleep 1.2
	"$rckpt" ckpt restore --job "$kjob" -o "$t/k.safetensors" >/dev/null 2>&1 && okrestore=$((okrestore + 1))
	last=$("$rckpt" ckpt ls --job "$kjob" | awk '$1 ~ /^[0-9]+$/ {s=$1} END {print s}')
	"$rckpt" ckpt save --job "$kjob" --lease 1 --step $((last + 1)) "${ckpts[0]}" >/dev/null 2>&1 &&
		okresume=$((okresume + 1))
	last=$((last + 1))
done
check "after 20 SIGKILLs the head always restores" test "$okrestore" -eq 20
check "  and the next writer always saves" test "$okresume" -eq 20
check "  and the final head restores" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$kjob" -o "$t/k.safetensors"

# Damage a record in a chunk object: restore fails closed.
rados -p rckpt -N "$job" get rckpt.chunk.00000 "$t/chunk"
size=$(stat -c %s "$t/chunk")
printf '\x5a' | dd of="$t/chunk" bs=1 seek=$((size - 20)) conv=notrunc status=none
rados -p rckpt -N "$job" put rckpt.chunk.00000 "$t/chunk"
check "a damaged record: restore exits 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/x.safetensors"
check "  with a checksum error" contains "$t/o" "checksum"
finish
