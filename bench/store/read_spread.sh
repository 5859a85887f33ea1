#!/usr/bin/env bash
# read_spread.sh — which OSDs serve rckpt's reads of a replicated pool
# (issue 29 item 4). Stores a checkpoint job and a PCR dataset, then reads
# them the same number of times with --read-from primary and with
# --read-from balance, and prints the read operations each OSD served
# (`ceph tell osd.N perf dump`: op_r). With primary reads an object's
# reads all go to its primary; balanced reads spread them over its
# replicas, so a dataset or checkpoint that many trainers read at once
# does not load one OSD per object.
#
# Needs a cluster of at least 2 OSDs with a replicated pool, for example:
#   ceph-conf/local-cluster.sh --dir /tmp/c3 --osds 3 --plugins build/rados-classes start
#   CEPH_CONF=/tmp/c3/ceph.conf bench/store/read_spread.sh --rckpt build/client/rckpt \
#       --checkpoints build/test-checkpoints --images build/test-pcr-images
set -euo pipefail
prog=${0##*/}

usage() {
	cat <<EOF
usage: $prog --rckpt PATH --checkpoints DIR --images DIR [--pool NAME] [--reads N]

Reads one checkpoint job and one PCR dataset N times (default 8) each with
primary and with balanced reads, and prints per OSD the read operations it
served in each mode (the cluster named by \$CEPH_CONF; it needs at least 2
OSDs and a replicated pool). Leaves nothing behind in the pool.

  --rckpt PATH        the rckpt tool
  --checkpoints DIR   step-N.safetensors files (the first 4 are saved)
  --images DIR        JPEGs (the first 256 are stored)
  --pool NAME         pool (default rckpt)
  --reads N           reads of each kind per mode (default 8)
  -h, --help          this text
EOF
}
die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*; try '$prog --help'" >&2; exit 2; }

rckpt="" ck="" imgs="" pool=rckpt reads=8
while [ $# -gt 0 ]; do
	case $1 in
	--rckpt) [ $# -ge 2 ] || usage_error "--rckpt needs a value"; rckpt=$2; shift 2 ;;
	--checkpoints) [ $# -ge 2 ] || usage_error "--checkpoints needs a value"; ck=$2; shift 2 ;;
	--images) [ $# -ge 2 ] || usage_error "--images needs a value"; imgs=$2; shift 2 ;;
	--pool) [ $# -ge 2 ] || usage_error "--pool needs a value"; pool=$2; shift 2 ;;
	--reads) [ $# -ge 2 ] || usage_error "--reads needs a value"; reads=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
done
[ -n "$rckpt" ] && [ -n "$ck" ] && [ -n "$imgs" ] || usage_error "--rckpt, --checkpoints and --images are needed"
[[ "$reads" =~ ^[1-9][0-9]{0,3}$ ]] || usage_error "--reads must be 1..9999"
[ -x "$rckpt" ] || die "$rckpt is not executable"
[ -n "${CEPH_CONF:-}" ] || die "set CEPH_CONF to the cluster's ceph.conf"
command -v ceph >/dev/null && command -v rados >/dev/null || die "the ceph and rados tools are not installed"

osds=$(ceph osd ls) || die "cannot list the OSDs"
[ "$(echo "$osds" | wc -l)" -ge 2 ] || die "the cluster has one OSD: nothing to spread over"
size=$(ceph osd pool get "$pool" size -f json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')
[ "$size" -ge 2 ] || die "pool $pool keeps $size copy: nothing to spread over"

t=$(mktemp -d)
job=read-spread-$$ ds=read-spread-$$
cleanup() {
	"$rckpt" -p "$pool" ckpt rm --job "$job" >/dev/null 2>&1 || true
	"$rckpt" -p "$pool" pcr rm --dataset "$ds" >/dev/null 2>&1 || true
	rm -rf "$t"
}
trap cleanup EXIT

# op_r of every OSD, one "osd count" line each
op_r() {
	local o
	for o in $osds; do
		printf '%s %s\n' "$o" "$(ceph tell "osd.$o" perf dump osd -f json |
			/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["osd"]["op_r"])')"
	done
}

files=()
for f in "$ck"/step-*.safetensors; do
	case $f in *.grads.safetensors) continue ;; esac
	[ -f "$f" ] && [ "${#files[@]}" -lt 4 ] && files+=("$f")
done
[ "${#files[@]}" -ge 1 ] || die "no step-N.safetensors in $ck"
"$rckpt" -p "$pool" ckpt save --job "$job" "${files[@]}" >/dev/null
mkdir -p "$t/img"
n=0
for f in "$imgs"/*.jpg; do
	[ -f "$f" ] && [ "$n" -lt 256 ] || break
	cp "$f" "$t/img/" && n=$((n + 1))
done
[ "$n" -ge 1 ] || die "no JPEG in $imgs"
"$rckpt" -p "$pool" pcr build --dataset "$ds" "$t/img" >"$t/build.log" 2>&1 || { cat "$t/build.log" >&2; die "pcr build failed"; }

# A replica serves a read only of an object whose writes it knows every
# copy has on disk, and it learns that from the primary's next write to
# the placement group: objects written last in their group are read from
# the primary until then. Data sets and checkpoints are read long after
# they were written; here a few small writes to every group stand in for
# that time.
head -c 64 /dev/urandom >"$t/filler"
for ((i = 0; i < 128; i++)); do rados -p "$pool" put "read-spread-filler-$$-$i" "$t/filler"; done
for ((i = 0; i < 128; i++)); do rados -p "$pool" rm "read-spread-filler-$$-$i"; done

echo "pool $pool: $size copies, OSDs $(echo $osds); $reads restores of job $job and $reads reads of dataset $ds (group 2) per mode"
printf '%-8s %-8s %s\n' mode what "read ops served by each OSD (osd.N=count), and the largest share"
for mode in primary balance; do
	for what in restore pcr; do
		before=$(op_r)
		for ((i = 0; i < reads; i++)); do
			if [ "$what" = restore ]; then
				"$rckpt" -p "$pool" --read-from "$mode" ckpt restore --job "$job" -o "$t/r.safetensors" >/dev/null
			else
				rm -rf "$t/out"
				"$rckpt" -p "$pool" --read-from "$mode" pcr get --dataset "$ds" --group 2 --out "$t/out" >/dev/null
			fi
		done
		after=$(op_r)
		join <(echo "$before") <(echo "$after") | awk -v m="$mode" -v w="$what" '
			{ d[$1] = $3 - $2; tot += $3 - $2; if ($3 - $2 > top) top = $3 - $2 }
			END { s = ""; for (o in d) s = s sprintf("osd.%s=%d ", o, d[o]);
			      printf "%-8s %-8s %s largest %.0f%%\n", m, w, s, tot ? 100 * top / tot : 0 }'
	done
done
