#!/usr/bin/env bash
# test_bench_codec_adam.sh BENCH_CODEC — bench_codec's Adam table never
# prints a score it did not measure (issue 50): on two steps of the real
# language model with their AdamW state it measures the update error of
# every exp_avg.P with its exp_avg_sq.P; with the same state under names it
# cannot pair (P.exp_avg, P.exp_avg_sq) it says that nothing was measured
# instead of "0.0000 measured, norm ratio 1.000".
set -u
. "$(dirname "$0")/../testlib.sh"
bench=$1
d=${RCKPT_TEST_LM_DIR:-}
if [ -z "$d" ] || [ ! -f "$d/step-000150.optim.safetensors" ]; then
	skip_test data "no real language model checkpoints (RCKPT_TEST_LM_DIR)"
fi
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir "$t/paired" "$t/unpaired"
cp "$d"/step-000150.* "$d"/step-000300.* "$t/paired/"
cp "$t/paired/"* "$t/unpaired/"
/usr/bin/python3 - "$t/unpaired" <<'PY'
import glob, json, struct, sys
for p in glob.glob(sys.argv[1] + "/*.optim.safetensors"):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            out[k] = v
            continue
        role, param = k.split(".", 1)
        out[param + "." + role] = v
    j = json.dumps(out).encode()
    j += b" " * (-len(j) % 8)
    open(p, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
check "exp_avg.P names: runs" expect_run 0 "$t/o1" "$bench" --methods rckpt "$t/paired"
check "  measures the update error" grep -Eq '^  rckpt .* est, [0-9.]+ measured  norm ratio [0-9.]+$' "$t/o1"
check "P.exp_avg names: runs" expect_run 0 "$t/o2" "$bench" --methods rckpt "$t/unpaired"
check "  says nothing was measured" grep -q '^  rckpt .*update error: none measured' "$t/o2"
check "  and prints no measured score" bash -c "! grep -q 'measured  norm ratio' '$t/o2'"
finish
