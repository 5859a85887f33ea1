#!/usr/bin/env bash
# test_cli_codec.sh RCKPT — `rckpt codec` on the real checkpoints the test
# fixture trains: encode a chain, inspect it, decode it, and the errors.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
d=${RCKPT_TEST_CKPT_DIR:-}
if [ -z "$d" ] || [ ! -f "$d/step-000025.safetensors" ]; then
	skip_test data "no real checkpoints (RCKPT_TEST_CKPT_DIR)"
fi
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
ckpts=$(ls "$d"/step-*.safetensors | grep -v grads | sort)
last=$(basename "$(echo "$ckpts" | tail -1)" .safetensors)          # step-000775
prev=$(basename "$(echo "$ckpts" | tail -2 | head -1)" .safetensors)
lastn=$(echo "$last" | sed 's/[^0-9]//g; s/^0*//')
prevn=$(echo "$prev" | sed 's/[^0-9]//g; s/^0*//')

check "codec --help exits 0" expect_run 0 "$t/o" "$rckpt" codec --help
check "  shows encode" contains "$t/o" "rckpt codec encode"
check "encode without -o: exit 2" expect_run 2 "$t/o" "$rckpt" codec encode $ckpts
check "bad --eps: exit 2" expect_run 2 "$t/o" "$rckpt" codec encode --eps x -o "$t/enc" $ckpts
check "unknown subcommand: exit 2" expect_run 2 "$t/o" "$rckpt" codec frobnicate
check "encode the chain" expect_run 0 "$t/o" "$rckpt" codec encode -o "$t/enc" $ckpts
check "  one line a step and a total" bash -c "[ \$(grep -c '\.rckpt$' '$t/o') -eq $(echo $ckpts | wc -w) ] && grep -q '^total:' '$t/o'"
check "  the first is a base" bash -c "head -1 '$t/o' | grep -q 'base, '"
check "inspect the last" expect_run 0 "$t/o" "$rckpt" codec inspect "$t/enc/$last.rckpt"
check "  a delta of the step before" contains "$t/o" "delta of step $prevn"
check "  lists the layer norm as a quantized norm" grep -q 'norm.weight .*norm/bias quantized' "$t/o"
check "a glob with the gradient files encodes the same chain" expect_run 0 "$t/o2" "$rckpt" codec encode -o "$t/enc2" "$d"/step-*.safetensors
check "  same bytes" bash -c "cmp -s '$t/enc/$last.rckpt' '$t/enc2/$last.rckpt'"
check "decode the chain" expect_run 0 "$t/o" "$rckpt" codec decode -o "$t/out.safetensors" $(ls "$t"/enc/*.rckpt)
check "  the last step" contains "$t/o" "step $lastn:"
# judged against the source by an oracle that shares no code with the decoder
cts() { /usr/bin/python3 "$(dirname "$0")/../close_to_source.py" "$@"; }
check "  is the last checkpoint, within eps" cts "$d/$last.safetensors" "$t/out.safetensors"
check "  (and not the one before it)" bash -c "! /usr/bin/python3 '$(dirname "$0")/../close_to_source.py' '$d/$prev.safetensors' '$t/out.safetensors' 2>/dev/null"
check "decode a step mid-chain" expect_run 0 "$t/o" "$rckpt" codec decode -o "$t/mid.safetensors" "$t/enc/step-000025.rckpt" "$t/enc/step-000050.rckpt" "$t/enc/step-000075.rckpt"
check "  is that checkpoint, within eps" cts "$d/step-000075.safetensors" "$t/mid.safetensors"
check "encode at eps 0.0004" expect_run 0 "$t/o" "$rckpt" codec encode --eps 0.0004 -o "$t/enc3" $ckpts
check "  decodes within that eps" bash -c "'$rckpt' codec decode -o '$t/e3.safetensors' \$(ls '$t'/enc3/*.rckpt) >/dev/null && /usr/bin/python3 '$(dirname "$0")/../close_to_source.py' --eps 0.0004 '$d/$last.safetensors' '$t/e3.safetensors'"
check "decode a delta alone: exit 1" expect_run 1 "$t/o" "$rckpt" codec decode -o "$t/x.safetensors" "$t/enc/$last.rckpt"
check "  says why" contains "$t/o" "base first"
cp "$t/enc/step-000025.rckpt" "$t/bad.rckpt"
printf '\x5a' | dd of="$t/bad.rckpt" bs=1 seek=200 conv=notrunc status=none
check "a damaged step file: exit 1" expect_run 1 "$t/o" "$rckpt" codec decode -o "$t/x.safetensors" "$t/bad.rckpt"
check "  checksum named" grep -qi 'checksum' "$t/o"
check "inspect a non-step file: exit 1" expect_run 1 "$t/o" "$rckpt" codec inspect "$d/step-000025.safetensors"
# A signed gradient EMA handed as the .grads sibling (here the last
# update, last - prev, which is what such a mean tracks): no RMS, refused.
mkdir "$t/sg"
cp "$d/$last.safetensors" "$t/sg/"
/usr/bin/python3 - "$d/$prev.safetensors" "$d/$last.safetensors" "$t/sg/$last.grads.safetensors" <<'PY'
import json, struct, sys
from array import array
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return h, b[8 + n:]
hp, dp = read(sys.argv[1])
hl, dl = read(sys.argv[2])
hdr, out, off = {}, bytearray(), 0
for k, v in hl.items():
    if k == "__metadata__" or v["dtype"] != "F32":
        continue
    a, b = array("f"), array("f")
    a.frombytes(dl[v["data_offsets"][0]:v["data_offsets"][1]])
    b.frombytes(dp[hp[k]["data_offsets"][0]:hp[k]["data_offsets"][1]])
    g = array("f", (x - y for x, y in zip(a, b)))
    hdr[k] = {"dtype": "F32", "shape": v["shape"], "data_offsets": [off, off + 4 * len(g)]}
    out += g.tobytes()
    off += 4 * len(g)
j = json.dumps(hdr).encode()
j += b" " * (-len(j) % 8)
open(sys.argv[3], "wb").write(struct.pack("<Q", len(j)) + j + out)
PY
check "a signed .grads sibling: exit 1" expect_run 1 "$t/o" "$rckpt" codec encode -o "$t/sgenc" "$t/sg/$last.safetensors"
check "  saying what the file must hold" grep -q "gradient's RMS.*finite and >= 0" "$t/o"
check "  and writing nothing" bash -c "[ ! -e '$t/sgenc/$last.rckpt' ]"
check "  its RMS sibling encodes" bash -c "cp '$d/$last.grads.safetensors' '$t/sg/' && '$rckpt' codec encode -o '$t/sgenc' '$t/sg/$last.safetensors' >/dev/null"
finish
