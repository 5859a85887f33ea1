#!/usr/bin/env bash
# test_cli_errors.sh RCKPT — errors users tripped on (issue 30 item 5),
# against the cluster named by CEPH_CONF: a missing job or dataset fails
# (exit 1) saying so, everywhere; messages say each thing once and name
# what is wrong; failures of `compact` go to stderr. Each check failed
# before its fix. Exit 77 (skipped) without a cluster, unless
# RCKPT_REQUIRE_CLUSTER=1.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
job=no-such-job-$$ ds=no-such-ds-$$

# a missing job: exit 1 and "does not exist", never an empty listing
for sub in "ls" "verify" "compact" "gc" "pin --step 1" "rm --step 1"; do
	check "ckpt $sub of a missing job: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt $sub --job "$job"
	check "  says it does not exist" contains "$t/o" "job $job does not exist"
done
check "ckpt ls of a missing job prints no table" bash -c "! grep -q 'steps,' '$t/o'"
check "  and does not create it" expect_run 1 "$t/o" "$rckpt" ckpt ls --job "$job"
check "ckpt rm of a missing job: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt rm --job "$job"
check "ckpt restore of a missing job: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/x.safetensors"
check "  says it does not exist" contains "$t/o" "job $job does not exist"
check "  no internal marker" bash -c "! grep -q 18446744073709551615 '$t/o'"
if [ -n "${RCKPT_LIBRARY:-}" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	check "Python: restore of a missing job raises, saying so" /usr/bin/python3 - "$job" <<'PY'
import sys, os
sys.path.insert(0, os.path.join(os.environ["RCKPT_SRC"], "client", "python"))
import rckpt
ck = rckpt.Checkpointer(pool=os.environ.get("RCKPT_POOL", "rckpt"), job=sys.argv[1], writer=False)
try:
    ck.restore()
except rckpt.RckptError as e:
    assert "does not exist" in str(e) and "18446744073709551615" not in str(e), str(e)
    sys.exit(0)
finally:
    ck.close()
sys.exit("no error")
PY
fi
check "compact --job of a missing job: exit 1" expect_run 1 "$t/o" bash -c "'$rckpt' compact --job '$job' >'$t/out' 2>'$t/err'"
check "  the failure on stderr" contains "$t/err" "job $job: FAILED"
check "  not on stdout" bash -c "! grep -q 'job $job: FAILED' '$t/out'"
check "pcr stat of a missing dataset: exit 1" expect_run 1 "$t/o" "$rckpt" pcr stat --dataset "$ds"
check "pcr rm of a missing dataset: exit 1" expect_run 1 "$t/o" "$rckpt" pcr rm --dataset "$ds"

# each thing said once
check "ckpt save of a missing file: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt save --job "$job" /nonexistent-$$.safetensors
check "  names the file once" test "$(grep -o "nonexistent-$$" "$t/o" | wc -l)" -eq 1
check "  and creates no job" expect_run 1 "$t/o" "$rckpt" ckpt ls --job "$job"
echo "not a picture" >"$t/notes.jpg"
check "pcr build of a non-JPEG: exit 1" expect_run 1 "$t/o" "$rckpt" pcr build --dataset "$ds" "$t/notes.jpg"
check "  names it, with why, once" test "$(grep -c "notes.jpg: not a JPEG" "$t/o")" -eq 1
check "  and builds nothing" expect_run 1 "$t/o" "$rckpt" pcr stat --dataset "$ds"
finish
