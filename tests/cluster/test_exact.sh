#!/usr/bin/env bash
# test_exact.sh RCKPT — the exact tier from the command line, in the cluster
# named by CEPH_CONF (formats/store.md "Exact steps"): a real checkpoint
# saved --exact restores to the file's own SHA-256 (the whole safetensors
# file, byte for byte), before and after a compaction that drops the steps
# around it; the lossy step after it is a base (its records hold the values
# whole, no levels), the next a delta; `pin --exact` is refused
# for a lossy step; export writes the exact bytes too. Exit 77 (skipped)
# without a cluster or the real checkpoints.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
need_real_checkpoints
src=$RCKPT_TEST_CKPT_DIR
t=$(mktemp -d)
job=ex-$$-$RANDOM
trap '"$rckpt" ckpt rm --job "$job" >/dev/null 2>&1; rm -rf "$t"' EXIT
mapfile -t ckpts < <(model_files "$src" | head -n 6)
s2=$(stepof "${ckpts[1]}") s3=$(stepof "${ckpts[2]}") s6=$(stepof "${ckpts[5]}")

check "save 2 lossy steps" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[@]:0:2}"
check "save one --exact" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" --exact "${ckpts[2]}"
check "  says so" contains "$t/o" "step $s3 "
check "    exact" contains "$t/o" " exact "
check "save 3 lossy steps after it" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[@]:3:3}"
check "ls marks the exact step" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$job"
check "  and only it" test "$(awk '$NF == "exact" {print $1}' "$t/o")" = "$s3"
check "  the next step is a base" test "$(awk -v s="$(stepof "${ckpts[3]}")" '$1 == s {print $2}' "$t/o")" = base
check "  the one after a delta" test "$(awk -v s="$(stepof "${ckpts[4]}")" '$1 == s {print $2}' "$t/o")" = delta
check "the exact step restores" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" --step "$s3" -o "$t/r.safetensors"
check "  saying it is exact" contains "$t/o" "(exact)"
check "  to the source's SHA-256" test "$(sha "$t/r.safetensors")" = "$(sha "${ckpts[2]}")"
check "a lossy step restores" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" --step "$s2" -o "$t/l.safetensors"
check "  to other bytes" test "$(sha "$t/l.safetensors")" != "$(sha "${ckpts[1]}")"
check "pin --exact of a lossy step is refused" expect_run 1 "$t/o" "$rckpt" ckpt pin --job "$job" --step "$s2" --exact
check "  saying why" contains "$t/o" "was not saved exact"
check "pin --exact of the exact step" expect_run 0 "$t/o" "$rckpt" ckpt pin --job "$job" --step "$s3" --exact
check "  says so" contains "$t/o" "pinned, exact"
check "compact to the last step" expect_run 0 "$t/o" "$rckpt" ckpt compact --job "$job" --keep-last 1
check "  keeps the pinned one" test "$("$rckpt" ckpt ls --job "$job" | awk '$1 ~ /^[0-9]+$/ && $2 !~ /^steps?,/ {print $1}' | tr '\n' ' ')" = "$s3 $s6 "
check "it restores exact after the compaction" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" --step "$s3" -o "$t/r.safetensors"
check "  to the source's SHA-256" test "$(sha "$t/r.safetensors")" = "$(sha "${ckpts[2]}")"
check "verify passes" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$job" --deep
check "export writes it exact" expect_run 0 "$t/o" "$rckpt" ckpt export --job "$job" --step "$s3" -o "$t/x"
check "  the same bytes" test "$(sha "$t/x/$(printf 'step-%06d' "$s3").safetensors")" = "$(sha "${ckpts[2]}")"
finish
