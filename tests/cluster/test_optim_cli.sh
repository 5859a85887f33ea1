#!/usr/bin/env bash
# test_optim_cli.sh RCKPT — Adam's state from the command line, in the
# cluster named by CEPH_CONF (issue 28): `ckpt save` takes a model's sibling
# STEP.optim.safetensors (the test LM's AdamW state, as
# bench/data/make_transformer.py writes it) as the optimizer's state; `ckpt ls`
# gives the weights' and the optimizer's bytes apart; `ckpt restore` writes
# the state to OUT.optim.safetensors, where the update Adam takes from it,
# m / (sqrt(v) + eps), is within the update error's bound of the
# original's (checked in Python), and a restore of one first moment
# alone reads its second's chunks too. Exit 77 (skipped) without a
# cluster or the test LM.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
if [ -z "${RCKPT_TEST_LM_DIR:-}" ] || ! ls "$RCKPT_TEST_LM_DIR"/step-*.optim.safetensors >/dev/null 2>&1; then
	skip_test data "no test LM with its optimizer's state (the make_test_lm fixture)"
fi
src=$RCKPT_TEST_LM_DIR
t=$(mktemp -d)
job=opt-$$-$RANDOM
trap '"$rckpt" ckpt rm --job "$job" >/dev/null 2>&1; rm -rf "$t"' EXIT
mapfile -t ckpts < <(model_files "$src")
last=${ckpts[${#ckpts[@]} - 1]}
sl=$(stepof "$last")

check "save the LM's steps with their optimizer's state" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[@]}"
check "ls gives the optimizer's bytes apart" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$job"
check "  per step" test "$(awk -v s="$sl" '$1 == s && $9 ~ /^[0-9]+$/ && $10 ~ /x$/ {print "yes"}' "$t/o")" = yes
check "  and over the job" contains "$t/o" "optimizer state"
check "restore the last step" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/r.safetensors"
check "  the state to its sibling" contains "$t/o" "of the optimizer's state -> $t/r.optim.safetensors"
check "  the update it makes is the original's, within the bound" \
	expect_run 0 "$t/p" /usr/bin/python3 - "$(dirname "$0")/../../bench/data" \
	"${last%.safetensors}.optim.safetensors" "$t/r.optim.safetensors" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from eval_checkpoint import read_safetensors  # noqa: E402
want, got = read_safetensors(sys.argv[2]), read_safetensors(sys.argv[3])
assert set(want) == set(got), (sorted(want), sorted(got))
num = den = 0.0
for k in want:
    if not k.startswith("exp_avg."):
        continue
    p = k[len("exp_avg."):]
    m, v = want[k].double(), want["exp_avg_sq." + p].double()
    m2, v2 = got[k].double(), got["exp_avg_sq." + p].double()
    assert bool((v2 >= 0).all()), p
    u, u2 = m / (v.sqrt() + 1e-8), m2 / (v2.sqrt() + 1e-8)
    num += float((u2 - u).pow(2).sum())
    den += float(u.pow(2).sum())
print("update error %.5f" % (num / den))
assert num / den <= 0.125, num / den  # RCKPT_OPT_EPS_DEFAULT, and a quarter for the estimate
PY
check "one first moment alone" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" \
	--tensors "exp_avg.head.weight" -o "$t/one.safetensors"
check "  comes back" contains "$t/o" "and 1 tensor of the optimizer's state"
finish
