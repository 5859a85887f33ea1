#!/usr/bin/env bash
# restart_quality.sh — a restarted writer against one writer, on a real run.
#
#   bench/experiments/restart_quality.sh [--rckpt PATH] DIR     (DIR: a run of make_transformer.py or
#                                                    make_checkpoints.py; CEPH_CONF: the cluster)
#
# Saves DIR's checkpoints into two fresh jobs: one `rckpt ckpt save` process
# per checkpoint (every save after the first is a new writer continuing the
# job's chain), and one process for all. Prints both jobs' overall ratios,
# then restores every step of the first job from the cluster and prints the
# real held-out loss increase of each (bench/data/eval_checkpoint.py) and the
# worst. Deletes both jobs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rckpt=$here/../../build/client/rckpt
if [ "${1:-}" = --rckpt ]; then rckpt=$2; shift 2; fi
case "${1:-}" in -h | --help | "") sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ]; exit $?;; esac
dir=$1
[ -n "${CEPH_CONF:-}" ] || { echo "restart_quality.sh: set CEPH_CONF to the cluster's ceph.conf" >&2; exit 2; }
mapfile -t ckpts < <(ls "$dir"/step-*.safetensors | grep -E '/step-[0-9]+\.safetensors$' | sort)
[ ${#ckpts[@]} -ge 2 ] || { echo "restart_quality.sh: $dir has fewer than 2 checkpoints" >&2; exit 2; }
one=rq-one-$$ all=rq-all-$$ out=$(mktemp -d)
trap '"$rckpt" ckpt rm --job $one >/dev/null 2>&1 || true; "$rckpt" ckpt rm --job $all >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
for f in "${ckpts[@]}"; do "$rckpt" ckpt save --job "$one" "$f" >/dev/null; done
"$rckpt" ckpt save --job "$all" "${ckpts[@]}" >/dev/null
echo "one writer per checkpoint: $("$rckpt" ckpt ls --job "$one" | grep 'overall as saved')"
echo "one writer for all:        $("$rckpt" ckpt ls --job "$all" | grep 'overall as saved')"
for f in "${ckpts[@]}"; do
	s=$(basename "$f" .safetensors)
	"$rckpt" ckpt restore --job "$one" --step $((10#${s#step-})) -o "$out/$s.safetensors" >/dev/null
done
/usr/bin/python3 - "$dir" "$out" "$here" <<'PY'
import os, sys
d, out, here = sys.argv[1:4]
sys.path.insert(0, os.path.join(here, "..", "data"))
import eval_checkpoint as ev
worst = None
for f in sorted(x for x in os.listdir(d) if x.startswith("step-") and x.count(".") == 1):
    m = ev.model_meta(os.path.join(d, f))
    l0 = ev.heldout_loss(os.path.join(d, f), m)
    inc = (ev.heldout_loss(os.path.join(out, f), m) - l0) / l0
    worst = inc if worst is None else max(worst, inc)
    print(f"{f}: held-out loss {inc:+.2%} (restored from the one-writer-per-checkpoint job)")
print(f"worst: {worst:+.2%}")
PY
