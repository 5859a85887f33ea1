#!/usr/bin/env bash
# test_cli_inputs.sh RCKPT — the command line's inputs and outputs (issue
# 47 items 6, 7), against the cluster named by CEPH_CONF with the real
# checkpoints of the test fixture: every file argument checked before use
# (a directory, a FIFO, a missing, truncated, foreign or unreadable file),
# one line naming the file and what is wrong, exit 1, nothing left behind;
# names and numbers that say their rule; --format json errors; `ckpt jobs`;
# restore writing the step's attachment as OUT.state; ls of one writer and
# of exact steps; the progress line on a terminal; SIGINT and SIGTERM of a
# save releasing the job's writer lock. Exit 77 (skipped) without a
# cluster or the real checkpoints.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$(realpath "$1")
need_cluster
need_real_checkpoints
src=$RCKPT_TEST_CKPT_DIR
pool=${RCKPT_POOL:-rckpt}
t=$(mktemp -d)
job=in-$$-$RANDOM
trap 'for j in "$job" "$job-x" "$job-g" "$job-s" "$job-py" "$job-sig" "$job-term" "$job-take" "$job-big"; do "$rckpt" ckpt rm --job "$j" >/dev/null 2>&1; done; rm -rf "$t"' EXIT
mapfile -t ckpts < <(model_files "$src")
one=${ckpts[0]}
cd "$t" || exit 1

# the bad inputs: a directory, a FIFO, a missing file, a truncated and a
# foreign file (and an unreadable one, where this user cannot read past
# permissions)
mkdir adir
mkfifo fifo
head -c 3000 "$one" >trunc.safetensors
echo "hello, not tensors" >text.safetensors
cp "$one" noread.safetensors
chmod 000 noread.safetensors
declare -A why=([adir]="is a directory" [fifo]="is a FIFO, not a regular file" [missing.safetensors]="No such file or directory"
	[trunc.safetensors]="truncated" [text.safetensors]="not a safetensors file" [noread.safetensors]="cannot read it: Permission denied")
mkdir out
for f in adir fifo missing.safetensors trunc.safetensors text.safetensors noread.safetensors; do
	if [ "$f" = noread.safetensors ] && [ -r noread.safetensors ]; then
		echo "ok - # skip $f: this user reads a file of mode 000 (root)"
		continue
	fi
	check "ckpt save of $f: exit 1" expect_run 1 "$t/o" timeout 60 "$rckpt" ckpt save --job "$job-x" "$f"
	check "  one line: the file and what is wrong" bash -c "[ \$(wc -l <'$t/o') -eq 1 ] && grep -qF 'rckpt ckpt: $f: ${why[$f]}' '$t/o'"
	check "  no job made" expect_run 1 "$t/o2" "$rckpt" ckpt ls --job "$job-x"
	check "codec encode of $f: exit 1, saying so" expect_run 1 "$t/o" timeout 60 "$rckpt" codec encode -o "$t/out/enc" "$f"
	check "  the file and what is wrong" contains "$t/o" "rckpt codec: $f: ${why[$f]}"
	check "  no output, no uninitialised bytes" bash -c "[ -z \"\$(ls -A '$t/out')\" ] && [ \$(wc -l <'$t/o') -eq 1 ] && ! LC_ALL=C grep -q '[^ -~]' '$t/o'"
done
for f in adir fifo; do
	check "codec inspect of $f: exit 1" expect_run 1 "$t/o" timeout 60 "$rckpt" codec inspect "$f"
	check "  says what it is, not 'Cannot allocate memory'" bash -c "grep -qF '$f: ${why[$f]}' '$t/o' && ! grep -q 'allocate' '$t/o'"
	check "codec decode of $f: exit 1" expect_run 1 "$t/o" timeout 60 "$rckpt" codec decode -o "$t/out/x.safetensors" "$f"
	check "  says what it is, writes nothing" bash -c "grep -qF '$f: ${why[$f]}' '$t/o' && [ -z \"\$(ls -A '$t/out')\" ]"
done
check "pcr get of a missing data set: exit 1" expect_run 1 "$t/o" "$rckpt" pcr get --dataset "no-ds-$$" --out "$t/out/imgs"
check "  makes no folder" test ! -e "$t/out/imgs"
check "ckpt export of a missing job: exit 1, no folder" bash -c "! '$rckpt' ckpt export --job '$job-x' -o '$t/out/exp' >'$t/o' 2>&1 && [ ! -e '$t/out/exp' ]"
check "export into a file: exit 1, saying so" bash -c "! '$rckpt' ckpt export --job '$job-x' -o '$t/text.safetensors' >'$t/o' 2>&1 && grep -qF 'text.safetensors: is a file, not a directory' '$t/o'"
check "a bad file after good ones: nothing saved" expect_run 1 "$t/o" "$rckpt" ckpt save --job "$job-x" "${ckpts[0]}" "${ckpts[1]}" trunc.safetensors
check "  names it" contains "$t/o" "trunc.safetensors: truncated"
check "  no step committed, no job" expect_run 1 "$t/o" "$rckpt" ckpt ls --job "$job-x"
check "a broken sibling optimizer file is named" bash -c "cp '$one' m-7.safetensors && mkdir m-7.optim.safetensors && ! '$rckpt' ckpt save --job '$job-x' m-7.safetensors >'$t/o' 2>&1; grep -qF 'm-7.optim.safetensors: is a directory' '$t/o'"
rmdir m-7.optim.safetensors

# names and numbers say their rule
check "a bad job name: exit 2" expect_run 2 "$t/o" "$rckpt" ckpt ls --job "a/b"
check "  states the rule" contains "$t/o" "1..63 characters of A-Z a-z 0-9 . _ -"
check "  names the character" contains "$t/o" "'/' is not allowed"
for bad in -trial .. .hidden; do
	check "job name '$bad': exit 2, the rule" expect_run 2 "$t/o" "$rckpt" ckpt ls --job "$bad"
	check "  the first character" contains "$t/o" "a name may not begin with '${bad:0:1}'"
done
check "a non-ASCII job name: exit 2" expect_run 2 "$t/o" "$rckpt" ckpt ls --job "j$(printf '\xc3\xa9')"
check "  names the byte" contains "$t/o" "byte 0xc3 is not allowed"
long=$(printf 'j%.0s' $(seq 64))
check "a 64-character job name: exit 2" expect_run 2 "$t/o" "$rckpt" ckpt save --job "$long" "$one"
check "  states the length" contains "$t/o" "64 characters, a name has at most 63"
check "a bad --step: exit 2, the rule" bash -c "! '$rckpt' ckpt restore --job '$job' --step x -o r.safetensors >'$t/o' 2>&1; grep -q 'step must be a whole number 0..18446744073709551614' '$t/o'"
check "a bad --eps: exit 2, the range" bash -c "'$rckpt' ckpt save --job '$job' --eps 1.5 '$one' >'$t/o' 2>&1; [ \$? = 2 ] && grep -q 'eps must be a number in (0, 1)' '$t/o'"
check "a bad --dataset: the rule" bash -c "'$rckpt' pcr stat --dataset 'x y' >'$t/o' 2>&1; [ \$? = 2 ] && grep -q '1..63 characters' '$t/o'"
check "a long --branch: the length of J.NAME" bash -c "'$rckpt' ckpt rewind --job '$job' --step 1 --branch '${long:0:60}' >'$t/o' 2>&1; [ \$? = 2 ] && grep -q 'over 63 characters' '$t/o'"

# --format json: an error is one JSON object on stdout, the same exit
json_err() { # WANT_EXIT CODE CMD...: the error object names CODE
	local want=$1 code=$2 rc=0
	shift 2
	"$@" >"$t/j" 2>"$t/e" || rc=$?
	[ "$rc" = "$want" ] && [ "$(wc -l <"$t/j")" -eq 1 ] && /usr/bin/python3 -c "
import json, sys
o = json.load(open('$t/j'))
assert set(o) >= {'error', 'code'} and o['code'] == '$code' and o['error'], o" || {
		echo "  exit $rc; stdout:" >&2
		sed 's/^/  | /' "$t/j" >&2
		return 1
	}
}
check "json: a directory to save" json_err 1 EISDIR "$rckpt" --format json ckpt save --job "$job-x" adir
check "json: a missing job" json_err 1 ENOENT "$rckpt" ckpt ls --job "$job-x" --format json
check "json: a bad job name (usage, exit 2)" json_err 2 EINVAL "$rckpt" --format json ckpt ls --job "a/b"
check "json: an unknown command" json_err 2 EINVAL "$rckpt" --format json frobnicate
check "json: restore into a directory" json_err 1 EISDIR "$rckpt" --format json ckpt restore --job "$job-x" -o adir
check "json: codec inspect of a FIFO" json_err 1 EINVAL "$rckpt" --format json codec inspect fifo

# a job with a state beside its model (what `restore` writes); restore
# into a directory leaves nothing behind
cp "${ckpts[0]}" m-1.safetensors
cp "${ckpts[1]}" m-2.safetensors
printf 'RCKP\002\000\000\000{"epoch": 3}' >m-1.state
check "save with a MODEL.state beside it" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" --step 1 m-1.safetensors
check "  says it is attached" contains "$t/o" "with its attached state"
check "a glob naming the state among models" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job-g" m-1.safetensors m-1.state
check "  saves the model, the state attached" bash -c "grep -c '^step ' '$t/o' | grep -qx 1 && grep -q 'with its attached state' '$t/o'"
check "restore -o a directory: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job" -o adir
check "  says so, in one line" bash -c "grep -qF 'adir: is a directory' '$t/o' && [ \$(wc -l <'$t/o') -eq 1 ]"
check "  leaves nothing behind" bash -c "[ -z \"\$(ls -A adir)\" ] && ! ls adir.* .adir* 2>/dev/null | grep -q ."
check "restore into a missing directory: exit 1" expect_run 1 "$t/o" "$rckpt" ckpt restore --job "$job" -o nodir/r.safetensors
check "  names it" contains "$t/o" "nodir/r.safetensors: its directory nodir: No such file or directory"
check "restore writes OUT.state" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" -o r.safetensors
check "  says so" contains "$t/o" "-> r.state"
check "  the attachment's bytes as stored" cmp -s m-1.state r.state
check "  no temporary left" bash -c "! ls -A | grep -q 'rckpt-[0-9]*\.tmp'"
check "a step without a state" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" --step 2 m-2.safetensors
check "  restores without OUT.state, removing the old one" bash -c "'$rckpt' ckpt restore --job '$job' -o r.safetensors >'$t/o' 2>&1 && [ ! -e r.state ] && grep -q 'removed r.state' '$t/o'"
check "restore --format json" bash -c "'$rckpt' --format json ckpt restore --job '$job' --step 1 -o r.safetensors >'$t/j' && /usr/bin/python3 -c \"
import json; o = json.load(open('$t/j'))
assert o['step'] == 1 and o['state_output'] == 'r.state' and o['output'] == 'r.safetensors', o\""
if [ -n "${RCKPT_LIBRARY:-}" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	check "Python's nested state: restore writes what _plain.loads reads" /usr/bin/python3 - "$job-py" "$rckpt" "$t" <<'PY'
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.environ["RCKPT_SRC"], "client", "python"))
import torch, rckpt
from rckpt import _plain
job, cli, t = sys.argv[1:4]
torch.manual_seed(0)
m = torch.nn.Linear(16, 8)
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)
m(torch.randn(4, 16)).sum().backward()
opt.step()
sched.step()
state = {"model": m.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
         "rng": torch.get_rng_state(), "epoch": 3}
with rckpt.Checkpointer(pool=os.environ.get("RCKPT_POOL", "rckpt"), job=job) as ck:
    h = ck.save(1, state)
    if hasattr(h, "wait"):
        h.wait()
r = subprocess.run([cli, "ckpt", "restore", "--job", job, "-o", t + "/py.safetensors"], capture_output=True, text=True)
assert r.returncode == 0, r.stderr
assert "py.state" in r.stdout, r.stdout
d = _plain.loads(open(t + "/py.state", "rb").read())
text = repr(d)
assert "epoch" in text and "scheduler" in text and "param_groups" in text, text[:400]
PY
	check "every tensor in the files: a strict load_state_dict, --tensors, a state without tensors, a save again" /usr/bin/python3 - "$job-py" "$rckpt" "$t" <<'PY'
import json, os, struct, subprocess, sys
sys.path.insert(0, os.path.join(os.environ["RCKPT_SRC"], "client", "python"))
import torch, rckpt
from rckpt import _plain
job, cli, t = sys.argv[1:4]
job += "-x"
pool = os.environ.get("RCKPT_POOL", "rckpt")
DT = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BOOL": torch.bool}


class M(torch.nn.Module):  # a -inf mask and an int buffer: what the codec keeps exact
    def __init__(s):
        super().__init__()
        s.fc, s.bn, s.head = torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64), torch.nn.Linear(64, 8)
        s.register_buffer("mask", torch.triu(torch.full((8, 8), float("-inf")), 1))

    def forward(s, x):
        return s.head(torch.relu(s.bn(s.fc(x))))


def st_read(p):  # safetensors, read as its spec says
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    out = {}
    for k, v in json.loads(b[8:8 + n]).items():
        a, e = v["data_offsets"]
        out[k] = torch.frombuffer(bytearray(b[8 + n + a:8 + n + e]), dtype=DT[v["dtype"]]).reshape(v["shape"])
    return out


def tensors_in(x):
    if isinstance(x, torch.Tensor):
        return 1
    if isinstance(x, dict):
        return sum(tensors_in(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(tensors_in(v) for v in x)
    return 0


torch.manual_seed(0)
m = M()
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
for _ in range(3):
    m(torch.randn(16, 32)).sum().backward()
    opt.step()
    opt.zero_grad()
try:
    with rckpt.Checkpointer(pool=pool, job=job) as ck:
        ck.save(1, model=m, optimizer=opt).wait()
    r = subprocess.run([cli, "ckpt", "restore", "--job", job, "-o", t + "/x.safetensors"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "10 tensors," in r.stdout and "and 18 tensors of the optimizer's state" in r.stdout, r.stdout
    sd = st_read(t + "/x.safetensors")
    m2 = M()
    m2.load_state_dict(sd, strict=True)  # every tensor of the model is there
    assert torch.equal(m2.mask, m.mask) and m2.bn.num_batches_tracked.item() == 3
    osd = st_read(t + "/x.optim.safetensors")
    assert osd["@optimizer/0/step"].item() == 3.0, sorted(osd)
    state = _plain.loads(open(t + "/x.state", "rb").read())
    assert tensors_in(state["other"]) == 0 and tensors_in(state["optimizer"]) == 0, state
    r = subprocess.run([cli, "ckpt", "restore", "--job", job, "--tensors", "head.weight,mask", "-o", t + "/p.safetensors"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(st_read(t + "/p.safetensors")) == ["head.weight", "mask"]
    r = subprocess.run([cli, "ckpt", "restore", "--job", job, "--tensors", "mask", "-o", t + "/q.safetensors"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and sorted(st_read(t + "/q.safetensors")) == ["mask"], r.stderr
    # restored files saved again: the exact ones back in the state, bit for bit
    r = subprocess.run([cli, "ckpt", "save", "--job", job + "b", "--step", "5", t + "/x.safetensors"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with rckpt.Checkpointer(pool=pool, job=job + "b", writer=False) as ck:
        back = ck.restore_full(5)
    assert torch.equal(back.state_dict["mask"], m.mask) and back.state_dict["bn.num_batches_tracked"].item() == 3
    opt2 = torch.optim.AdamW(M().parameters(), lr=1e-3)
    opt2.load_state_dict(back.optimizer)
    # an int tensor with no state beside it to keep it: refused, naming it
    os.rename(t + "/x.state", t + "/x.state.off")
    r = subprocess.run([cli, "ckpt", "save", "--job", job + "b", "--step", "6", t + "/x.safetensors"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "bn.num_batches_tracked" in r.stderr, r.stderr
finally:
    for j in (job, job + "b"):
        subprocess.run([cli, "ckpt", "rm", "--job", j], capture_output=True)
PY
fi

# ckpt jobs, text and JSON; ls of one writer
check "ckpt jobs" expect_run 0 "$t/o" "$rckpt" ckpt jobs
check "  lists the job: 2 steps, head 2" grep -qE "^$job +2 +2 +[0-9]+" "$t/o"
check "  and a count" grep -qE '^[0-9]+ job\(s\) in pool' "$t/o"
check "ckpt jobs --format json" bash -c "'$rckpt' ckpt jobs --format json >'$t/j' && /usr/bin/python3 -c \"
import json; o = json.load(open('$t/j'))
j = [x for x in o['jobs'] if x['job'] == '$job']
assert len(j) == 1 and j[0]['steps'] == 2 and j[0]['head'] == 2 and j[0]['stored_bytes'] > 0 and 'writer' in j[0], o\""
check "ls --format json: one writer is 1 rank" bash -c "'$rckpt' --format json ckpt ls --job '$job' >'$t/j' && /usr/bin/python3 -c \"
import json; o = json.load(open('$t/j'))
assert [s['ranks'] for s in o['steps']] == [1, 1], o\""
check "ls hints at ckpt jobs" bash -c "'$rckpt' ckpt ls >'$t/o' 2>&1; grep -q \"'rckpt ckpt jobs' lists the jobs\" '$t/o'"

# exact steps: their ls line says exact, and no false split
check "an exact save" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job-s" --exact "${ckpts[0]}"
check "  ls: exact, not split" bash -c "'$rckpt' ckpt ls --job '$job-s' >'$t/o' && grep -qE '^[0-9]+ .*\(exact: whole step, not split\).* exact$' '$t/o'"
check "  json: no split of the stored bytes" bash -c "'$rckpt' ckpt ls --job '$job-s' --format json >'$t/j' && /usr/bin/python3 -c \"
import json; s = json.load(open('$t/j'))['steps'][0]
assert s['exact'] and s['weights_stored_bytes'] is None and s['optimizer_stored_bytes'] is None, s\""

# the progress line: on a terminal only, redrawn in place, cleared
cat >"$t/on_tty.py" <<'PY'
import os, pty, select, subprocess, sys
out, err, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
m, s = pty.openpty()
with open(out, "wb") as fo:
    p = subprocess.Popen(cmd, stdout=fo, stderr=s, stdin=subprocess.DEVNULL)
os.close(s)
got = b""
while True:
    try:
        r, _, _ = select.select([m], [], [], 0.1)
    except OSError:
        break
    if r:
        try:
            b = os.read(m, 65536)
        except OSError:
            break
        if not b:
            break
        got += b
open(err, "wb").write(got)
sys.exit(p.wait())
PY
# four steps of an 8 M-parameter tensor: a save that lasts over a second
# (1.5 M took 0.27 s once the encoder got faster), so the line (first
# drawn after 250 ms) is surely drawn and redrawn
/usr/bin/python3 - "$t" <<'PY'
import json, struct, sys, numpy as np
for s in range(4):
    w = (np.random.default_rng(s).standard_normal((4096, 2048)) * (1 + s / 100)).astype("<f4").tobytes()
    h = json.dumps({"w": {"dtype": "F32", "shape": [4096, 2048], "data_offsets": [0, len(w)]}}).encode()
    open("%s/big-%d.safetensors" % (sys.argv[1], s), "wb").write(struct.pack("<Q", len(h)) + h + w)
PY
check "save on a terminal: a progress line" /usr/bin/python3 "$t/on_tty.py" "$t/po" "$t/pe" "$rckpt" ckpt save --job "$job-big" --step 10 "$t"/big-{0,1,2,3}.safetensors
check "  redrawn in place, files done of 4" bash -c "grep -q \$'\\r''saving step [0-9]*: [0-9]*/4 files' '$t/pe'"
check "  each drawing clears the rest of the line" bash -c "grep -q \$'\\033\\\\[K' '$t/pe'"
check "  the steps on stdout, whole lines" test "$(grep -c '^step ' "$t/po")" -eq 4
rm -f "$t"/big-*.safetensors
check "not on a terminal: no progress" bash -c "'$rckpt' ckpt restore --job '$job' -o r.safetensors 2>'$t/e' >/dev/null && ! grep -q \$'\\r' '$t/e'"
check "restore on a terminal: a progress line" /usr/bin/python3 "$t/on_tty.py" "$t/po" "$t/pe" "$rckpt" ckpt restore --job "$job" -o r.safetensors
check "  (drawn or not, never left behind)" bash -c "[ ! -s '$t/pe' ] || tail -c 8 '$t/pe' | od -c | grep -q '033   \\[   K'"

# SIGINT and SIGTERM of a save: the writer lock released before it exits
locked() { rados -p "$pool" -N "$1" lock info rckpt.job rckpt.writer 2>/dev/null | grep -q '"cookie"'; }
for sig in INT TERM; do
	j=$job-sig
	[ $sig = TERM ] && j=$job-term
	want=$([ $sig = INT ] && echo 130 || echo 143)
	: >"$t/so"
	# a long lease: without the release, the next writer would wait
	env --default-signal=$sig "$rckpt" ckpt save --job "$j" --lease 600 "${ckpts[@]}" >"$t/so" 2>"$t/se" &
	pid=$!
	for ((k = 0; k < 600; k++)); do grep -q '^step ' "$t/so" && break; sleep 0.1; done
	check "SIG$sig during a save: the lock is held meanwhile" locked "$j"
	kill -$sig $pid
	wait $pid
	st=$?
	check "  exits $want" test "$st" = "$want"
	check "  says the lock was released" grep -q "interrupted by SIG$sig: .*writer lock released" "$t/se"
	check "  the lock is free" bash -c "! { rados -p '$pool' -N '$j' lock info rckpt.job rckpt.writer 2>/dev/null | grep -q '\"cookie\"'; }"
	last=$(awk '$1 == "step" {s=$2} END {print s}' "$t/so")
	check "  a second save right after succeeds" expect_run 0 "$t/o" timeout 20 "$rckpt" ckpt save --job "$j" --step $((last + 1000000)) "$one"
	check "  and gc is not refused" expect_run 0 "$t/o" timeout 20 "$rckpt" ckpt gc --job "$j"
done

# takeover (formats/store.md "Takeover"): a live writer, paused with
# SIGSTOP, holds the lock; --no-takeover waits --wait seconds and names it;
# --takeover takes the job at once, and the paused writer, let go, fails
j=$job-take
# many steps (the files three times over), so that it is surely still
# saving when it is paused after its first
"$rckpt" ckpt save --job "$j" --lease 600 --step 1 "${ckpts[@]}" "${ckpts[@]}" "${ckpts[@]}" >"$t/so" 2>"$t/se" &
pid=$!
for ((k = 0; k < 600; k++)); do grep -q '^step ' "$t/so" && break; sleep 0.1; done
kill -STOP $pid
check "a paused writer holds the lock" bash -c "kill -0 $pid && { rados -p '$pool' -N '$j' lock info rckpt.job rckpt.writer 2>/dev/null | grep -q '\"cookie\"'; }"
t0=$SECONDS
check "--no-takeover --wait 2: exit 1 after waiting" expect_run 1 "$t/o" timeout 60 "$rckpt" ckpt save --job "$j" --no-takeover --wait 2 --step 999999 "$one"
check "  it waited" test $((SECONDS - t0)) -ge 2
check "  names the holder, still running" bash -c "grep -q 'another writer: process $pid of this machine, still running' '$t/o'"
check "by default, not taken from a live writer" expect_run 1 "$t/o" timeout 60 "$rckpt" ckpt save --job "$j" --step 999999 "$one"
check "--takeover: saved at once" expect_run 0 "$t/o" timeout 60 "$rckpt" ckpt save --job "$j" --takeover --step 999999 "$one"
check "ckpt jobs names no writer now (the lock released)" bash -c "'$rckpt' ckpt jobs | grep '^$j ' | grep -q 'free (token'"
kill -CONT $pid
wait $pid
st=$?
check "the paused writer, let go, fails" test "$st" = 1
check "  refused: taken over, or a stale request (fenced)" grep -Eq "taken over|Stale file handle" "$t/se"
check "the takeover's step is the newest" bash -c "'$rckpt' ckpt ls --job '$j' --format json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"steps\"][-1][\"step\"] == 999999'"
"$rckpt" ckpt rm --job "$j" >/dev/null 2>&1
finish
