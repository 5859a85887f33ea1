#!/usr/bin/env bash
# test_bench.sh RCKPT — `rckpt bench` against the cluster named by
# CEPH_CONF, on the test fixtures' data: four suites at --quick (the report,
# the machine-readable results, the plots, `compare`, the refusals), then
# every suite at the driver's tests' size (--tiny), so that a suite that
# breaks fails here; the live progress line on a terminal, and none
# elsewhere. Exit 77 (skipped) without a cluster or the fixtures' data.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
need_real_checkpoints
ls "${RCKPT_TEST_LM_DIR:-/nonexistent}"/step-*.optim.safetensors >/dev/null 2>&1 ||
	skip_test data "no transformer run with its optimizer's state (RCKPT_TEST_LM_DIR: the make_test_lm fixture)"
[ -f "${RCKPT_TEST_PCR_DIR:-/nonexistent}/labels.csv" ] ||
	skip_test data "no photo data set (RCKPT_TEST_PCR_DIR: the make_test_pcr_images fixture)"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

# refusals first: nothing is written
check "no profile: exit 2" expect_run 2 "$t/o" "$rckpt" bench --out "$t/x"
check "  says what to give" contains "$t/o" "give --quick or --full"
check "both profiles: exit 2" expect_run 2 "$t/o" "$rckpt" bench --quick --full --out "$t/x"
check "no --out: exit 2" expect_run 2 "$t/o" "$rckpt" bench --quick
check "bad seed: exit 2" expect_run 2 "$t/o" "$rckpt" bench --quick --seed x1 --out "$t/x"
check "unknown suite: exit 2" expect_run 2 "$t/o" "$rckpt" bench --quick --suites save,nosuch --out "$t/x"
check "  names it" contains "$t/o" "no suite nosuch"
check "a bad link rate: exit 2" expect_run 2 "$t/o" "$rckpt" bench --quick --link 1g,3x --out "$t/x"
check "  names it" contains "$t/o" "rate '3x'"
check "too few checkpoints: exit 2" expect_run 2 "$t/o" "$rckpt" bench --quick --checkpoints "$t" --out "$t/x"
check "  says how many it needs" contains "$t/o" "needs at least 17 files"
check "missing pool: exit 1" expect_run 1 "$t/o" "$rckpt" bench --quick --pool no-such-pool-$$ --out "$t/x"
check "  in one line" lines "$t/o" 1
check "  nothing written" test ! -e "$t/x"

# a run of four suites, on the first 17 of the fixture's checkpoints: the
# fewest a run takes (the restore suite's chains reach 16), so that every
# save, restore and encode it repeats goes over fewer files, proving the same
ck=$t/ckpts
mkdir "$ck"
for f in $(model_files "$RCKPT_TEST_CKPT_DIR" | head -n 17); do
	ln -s "$f" "$ck/"
	[ ! -e "${f%.safetensors}.grads.safetensors" ] || ln -s "${f%.safetensors}.grads.safetensors" "$ck/"
done
check "bench --quick (save, compression, restore, baseline): exit 0" expect_run 0 "$t/run.log" \
	"$rckpt" bench --quick --suites baseline,save,compression,restore --checkpoints "$ck" --seed 7 --out "$t/a"
check "  prints the report's path" contains "$t/run.log" "report: $t/a/report.md"
check "  prints the summary" contains "$t/run.log" "| checkpoint save (fp32 logical) |"
r=$t/a/report.md
check "report: the command line" contains "$r" "command: \`rckpt bench --quick --suites baseline,save,compression,restore"
check "report: the machine" grep -qE '^- machine: .+ CPUs, .+ GiB' "$r"
check "report: the cluster" grep -qE '^- cluster: conf .+ pool `rckpt`' "$r"
check "report: the plugins' versions" grep -qE '^plugin +rckpt +[0-9.]+ ' "$r"
check "report: every suite ran" bash -c "[ \$(grep -cE '^\| (baseline|save|compression|restore) \| ok ' '$r') -eq 4 ]"
check "report: the others are marked not run" contains "$r" "Not run (not in --suites)."
check "report: the compression table has every method" bash -c \
	"for m in rckpt abl-huffman-delta abl-no-rearrange qd checknrun zstd-3; do grep -q \"^| \$m | \" '$r' || exit 1; done"
check "results.csv: a header and rows" bash -c \
	"head -1 '$t/a/results.csv' | grep -qx 'suite,metric,unit,median,min,max,n,better' && [ \$(wc -l < '$t/a/results.csv') -gt 20 ]"
# the figures hold together: median within [min, max], repeated runs where
# timed, and consistent with each other. Which is faster is the benchmark's
# to report, not a test's to assert (2 shared cores, sanitizers).
check "results.json: figures hold together" /usr/bin/python3 - "$t/a/results.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
m = {(x["suite"], x["name"]): x for x in r["metrics"]}
assert r["meta"]["seed"] == 7 and r["meta"]["reps"] == 3, r["meta"]
for x in r["metrics"]:
    assert x["min"] <= x["median"] <= x["max"], x
save = [x for k, x in m.items() if k[1].startswith("save throughput")][0]
assert save["n"] == 3, save
assert m[("baseline", "rados write, 64 KiB objects")]["n"] == 3
ratio = m[("compression", "ratio over the run: rckpt")]["median"]
assert ratio > m[("compression", "ratio over the run: zstd-3")]["median"] > 1, ratio
assert ratio > m[("compression", "ratio over the run: qd")]["median"], ratio
# what a save stores equals the ratio it reports
s = m[("save", "compression ratio of the saves")]["median"]
assert s > 2, s
# the restore suite timed every chain length, and compaction, 3 times each
chains = sorted(int(k[1].split()[2].rstrip(":")) for k in m if k[1].startswith("restore, chain"))
assert chains[0] == 1 and chains[-1] == 16, chains
for name in ("restore, chain 16: server-side", "restore, chain 16: after compaction"):
    assert m[("restore", name)]["n"] == 3, m[("restore", name)]
stall = r["data"]["stall"]["ways"]
assert {"rckpt snapshot", "rckpt sync"} <= set(stall), stall.keys()
EOF
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	for p in compression_per_checkpoint compression_overall restore_vs_chain save_stall; do
		check "plot $p.png is a PNG" bash -c "head -c 8 '$t/a/$p.png' | od -An -c | grep -q 'P   N   G'"
		check "  and the report shows it" contains "$r" "($p.png)"
	done
else
	echo "# python3-matplotlib is not installed: plots not checked"
fi
check "no progress line where there is no terminal" bash -c "! grep -q \$'[\\r\\033]' '$t/run.log'"
check "  but a line per suite" contains "$t/run.log" "rckpt bench: suite restore ..."
check "raw: every tool's output kept" bash -c "ls '$t/a/raw' | grep -q '^bench_store-2.txt$' && grep -q '^\\$ .*bench_codec' '$t/a/raw/bench_codec.txt'"
if command -v rados >/dev/null; then
	check "the suites left no object behind" bash -c "! rados -p rckpt ls --all | grep -qE '^(bench|rckpt-bench)'"
fi

# compare
check "compare A A: exit 0" expect_run 0 "$t/o" "$rckpt" bench compare "$t/a" "$t/a"
check "  every ratio is 1" bash -c "[ \$(grep -cE ' 1\.000$' '$t/o') -gt 20 ] && ! grep -E ' [0-9]+\.[0-9]{3}( [A-Za-z]+)?$' '$t/o' | grep -vq ' 1\.000$'"
check "  nothing worse" contains "$t/o" "0 measure(s) worse"
mkdir "$t/b" # compare takes report folders
/usr/bin/python3 - "$t/a/results.json" "$t/b/results.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["metrics"]:
    if x["name"].startswith("save throughput"):
        for k in ("median", "min", "max"):
            x[k] /= 4
json.dump(r, open(sys.argv[2], "w"))
EOF
check "compare with a slower run: exit 0" expect_run 0 "$t/o" "$rckpt" bench compare "$t/a" "$t/b"
check "  marks the save throughput worse" grep -qE '^save: save throughput.* 0\.250 WORSE$' "$t/o"
check "  counts it" contains "$t/o" "1 measure(s) worse"
check "compare a folder without results: exit 1" expect_run 1 "$t/o" "$rckpt" bench compare "$t" "$t/a"
check "  says so" contains "$t/o" "not a benchmark result"
check "compare with one folder: exit 2" expect_run 2 "$t/o" "$rckpt" bench compare "$t/a"

# --format json (issue 30 item 4): stdout is one JSON document, results.json's.
# The compression suite: seconds here, where the baseline's `rados bench`
# runs take 2 s each, 12 of them
check "bench --format json: exit 0" expect_run 0 "$t/o" bash -c \
	"'$rckpt' --format json bench --quick --suites compression --checkpoints '$ck' --seed 7 --out '$t/j' >'$t/j.out' 2>'$t/j.err'"
check "  stdout is results.json" /usr/bin/python3 -c "
import json, sys
a = json.load(open('$t/j.out')); b = json.load(open('$t/j/results.json'))
assert a['metrics'] == b['metrics'] and a['meta']['suites'] == b['meta']['suites'], 'differ'"
check "  progress on stderr" contains "$t/j.err" "rckpt bench: suite compression"
check "  and no progress line" bash -c "! grep -q \$'[\\r\\033]' '$t/j.err' '$t/j.out'"

# The other suites (issue 47: every suite runs here), at the driver's
# --tiny size: the 17 checkpoints, the fixture's transformer run (its
# optimizer's state beside every step, which the codec carries and the
# frontier must leave out of the model) and 64 of the fixture's JPEGs.
# Run on a terminal (script(1) gives it one), where it draws the live
# progress line. `rckpt bench` takes --quick or --full; the driver it runs
# takes --tiny and --lm as well.
im=$t/img
mkdir "$im"
for f in $(ls "$RCKPT_TEST_PCR_DIR"/*.jpg | sort | head -n 64); do ln -s "$f" "$im/"; done
head -n 65 "$RCKPT_TEST_PCR_DIR/labels.csv" >"$im/labels.csv"
tiny=(/usr/bin/python3 "$(dirname "$0")/../../bench/report/rckpt_bench.py" run --tiny --seed 7
	--suites frontier,pcr,loader,group,resume,link,gpu --link 1g
	--checkpoints "$ck" --images "$im" --lm "$RCKPT_TEST_LM_DIR" --pool rckpt
	--bin "$(dirname "$rckpt")/../bench" --rckpt "$rckpt" --out "$t/tiny")
tty=0
command -v script >/dev/null && tty=1
on_tty() {
	if [ "$tty" = 1 ]; then script -qec "$(printf '%q ' "$@")" /dev/null </dev/null; else "$@"; fi
}
[ "$tty" = 1 ] || echo "# script(1) (bsdutils) is not installed: no terminal for the tiny run, its progress line is not checked"
t0=$SECONDS
check "the other suites, --tiny: exit 0" expect_run 0 "$t/tiny.log" on_tty "${tiny[@]}"
echo "# the other suites at the tiny size: $((SECONDS - t0)) s"
r=$t/tiny/report.md
check "  every suite ok (the GPU's ok or skipped; the link's where no namespace can be made)" bash -c \
	"[ \$(grep -cE '^\| (frontier|pcr|loader|group|resume) \| ok ' '$r') -eq 5 ] &&
	 grep -qE '^\| link \| (ok|skipped: cannot create a network namespace)' '$r' &&
	 grep -qE '^\| gpu \| (ok|skipped)' '$r'"
check "  the link suite left no namespace, pair or cluster behind" bash -c \
	"! ip netns list | grep -q '^rckpt-link-' && ! ip -o link | grep -qE ': rkl[0-9]+a[@:]' && ! ls -d /tmp/rckpt-link-* 2>/dev/null"
check "  the suites' data hold together" /usr/bin/python3 - "$t/tiny/results.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
d = r["data"]
assert r["meta"]["profile"] == "tiny" and r["meta"]["reps"] == 1, r["meta"]
# the frontier: both methods, judged by the model's real held-out loss
fr = d["frontier"]
assert {x["method"] for x in fr} == {"rckpt", "qd"}, fr
for x in fr:
    assert x["ratio"] > 1 and -0.5 < x["last"] < 0.5 and x["worst"] >= x["last"], x
# PCR: more groups, more bytes; the last at full fidelity
rows = d["pcr"]["rows"]
assert len(rows) >= 2 and rows[-1]["frac"] > rows[0]["frac"] and rows[-1]["ssim"] > 0.99, rows
# the loader: three loaders, both epochs (0 and 1)
lb = d["loader"]["run"]["rows"]
assert "regular" in {x["loader"] for x in lb} and len({x["loader"] for x in lb}) == 3, lb
assert {x["epoch"] for x in lb} == {0, 1}, lb
# group saves by 1, 2 and 4 ranks
assert set(d["group"]["summary"]) == {"1", "2", "4"}, d["group"]["summary"].keys()
# the resume: the 1M model after 1 and 4 saves, each against a raw read
# and torch.load, with its stages
rs = d["resume"]
assert [x["chain"] for x in rs] == [1, 4], rs
for x in rs:
    assert len(x["A/B"]) == 1 and x["A/B"][0] > 0 and x["A/C"][0] > 0, x
    assert x["stages_ms"]["t_fetch"] > 0 and x["stages_ms"]["decode_cpu"] > 0, x["stages_ms"]
# behind the shaped link: the link carried about its rate (1 Gbit/s: 125
# MB/s at most), and a pair of each kind was timed
if "link" not in d:
    assert r["meta"]["suites"]["link"].startswith("skipped: cannot create"), r["meta"]["suites"]
    sys.exit(0)
ln = d["link"]["1g"]
assert 20 < ln["rados_write"] < 130 and 20 < ln["rados_read"] < 130, ln
p = ln["pairs"][0]
assert all(p[k] > 0 for k in ("save_s", "raw_save_s", "restore_s", "raw_read_s")), p
rr = ln["resume"] # and a trainer's resume behind it: the tiny run's 1M model
assert len(rr) == 1 and rr[0]["size_m"] == 1 and rr[0]["chain"] == 1 and rr[0]["A/B"][0] > 0, rr
EOF
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	for p in frontier pcr_groups loader; do
		check "  plot $p.png is a PNG" bash -c "head -c 8 '$t/tiny/$p.png' | od -An -c | grep -q 'P   N   G'"
		check "  and the report shows it" contains "$r" "($p.png)"
	done
fi
if [ "$tty" = 1 ]; then
	p=$t/tiny.lines # each redraw on a line of its own
	tr '\r' '\n' <"$t/tiny.log" | sed 's/^\x1b\[K//' >"$p"
	check "  the progress line is redrawn in place" grep -q $'\r\x1b\\[K' "$t/tiny.log"
	check "  suite i of N, elapsed seconds" grep -qE '^rckpt bench: suite 1/7 frontier, [0-9]+ s: ' "$p"
	check "  the seconds go on" grep -qE '^rckpt bench: suite [1-7]/7 [a-z]+, [1-9][0-9]* s: ' "$p"
	check "  what the suite's tool prints" grep -qE '^rckpt bench: suite 1/7 frontier, [0-9]+ s: frontier: frontier: eps 0.0012' "$p"
	check "  each suite's status when it ends" grep -qE '^rckpt bench: suite 1/7 frontier: ok \([0-9]+ s\)' "$p"
	check "  the last one's too" grep -qE '^rckpt bench: suite 7/7 gpu: (ok|skipped)' "$p"
fi
finish
