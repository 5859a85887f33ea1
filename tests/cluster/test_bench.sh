#!/usr/bin/env bash
# test_bench.sh RCKPT — `rckpt bench` against the cluster named by
# CEPH_CONF, on the test fixtures' checkpoints (a few suites, CI-sized):
# the report, the machine-readable results, the plots, `compare`, and the
# refusals. Exit 77 (skipped) without a cluster or real checkpoints.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
need_real_checkpoints
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
check "raw: every tool's output kept" bash -c "ls '$t/a/raw' | grep -q '^bench_store-2.txt$' && grep -q '^\\$ .*bench_codec' '$t/a/raw/bench_codec.txt'"
if command -v rados >/dev/null; then
	check "the suites left no object behind" bash -c "! rados -p rckpt ls --all | grep -qE '^(bench|rckpt-bench)'"
fi

# compare
check "compare A A: exit 0" expect_run 0 "$t/o" "$rckpt" bench compare "$t/a" "$t/a"
check "  every ratio is 1" bash -c "[ \$(grep -cE ' 1\.000$' '$t/o') -gt 20 ] && ! grep -E ' [0-9]+\.[0-9]{3}( [A-Za-z]+)?$' '$t/o' | grep -vq ' 1\.000$'"
check "  nothing worse" contains "$t/o" "0 measure(s) worse"
/usr/bin/python3 - "$t/a/results.json" "$t/b.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["metrics"]:
    if x["name"].startswith("save throughput"):
        for k in ("median", "min", "max"):
            x[k] /= 4
json.dump(r, open(sys.argv[2], "w"))
EOF
check "compare with a slower run: exit 0" expect_run 0 "$t/o" "$rckpt" bench compare "$t/a" "$t/b.json"
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
finish
