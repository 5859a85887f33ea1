#!/usr/bin/env bash
# test_pcr_store.sh RCKPT — PCR datasets in the cluster named by CEPH_CONF,
# on the whole photo data set: build (grayscale and colour, labels), every
# image identical to its source at the last group, reads at k groups moving
# only the head and groups 1..k, images fetched through the OSD equal to
# those cut from a ranged read, refusals (an existing dataset, a non-JPEG
# or truncated file, a bad labels file) that leave nothing behind, a
# damaged record failing closed, ls, stat and rm. Exit 77 (skipped)
# without a cluster or without the data set.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
need_cluster
src=${RCKPT_TEST_PCR_DIR:-}
if [ -z "$src" ] || [ ! -f "$src/labels.csv" ]; then
	skip_test data "no photo data set (the make_test_pcr_images fixture)"
fi
t=$(mktemp -d)
ds=pcr-$$-$RANDOM
trap 'rm -rf "$t"; "$rckpt" pcr rm --dataset "$ds" >/dev/null 2>&1; "$rckpt" pcr rm --dataset "$ds-bad" >/dev/null 2>&1' EXIT
n=$(ls "$src"/*.jpg | wc -l)

check "build the data set ($n JPEGs)" expect_run 0 "$t/o" "$rckpt" pcr build --dataset "$ds" --labels "$src/labels.csv" --images-per-record 512 "$src"
check "  every image in" contains "$t/o" "$n images (0 skipped) in $(((n + 511) / 512)) records"
check "  no progress line when not on a terminal" bash -c "! grep -q '$n/$n files' '$t/o' && ! grep -q \$'\\r' '$t/o'"
check "a second build of it is refused" expect_run 1 "$t/o" "$rckpt" pcr build --dataset "$ds" "$src"
check "  saying it exists" contains "$t/o" "exists"
check "ls lists it" expect_run 0 "$t/o" "$rckpt" pcr ls
check "  with its images" grep -qE "^$ds +$n " "$t/o"
check "ls --format json" expect_run 0 "$t/o.json" "$rckpt" pcr ls --format json
check "  lists it with its images" /usr/bin/python3 -c "
import json; d = {x['dataset']: x for x in json.load(open('$t/o.json'))['datasets']}; assert d['$ds']['images'] == $n, d"
check "stat --format json" expect_run 0 "$t/o.json" "$rckpt" pcr stat --dataset "$ds" --format json
check "  every group, full fidelity at the last" /usr/bin/python3 -c "
import json; s = json.load(open('$t/o.json')); g = s['groups']
assert s['images'] == $n and len(g) == 10 and g[-1]['mssim'] == 1.0 and g[-1]['read_through_bytes'] == s['stored_bytes'], s"
check "stat" expect_run 0 "$t/o" "$rckpt" pcr stat --dataset "$ds"
check "  10 groups (colour images), 6 for grayscale ones" contains "$t/o" "10 groups"
check "  full fidelity through the last group" grep -qE "^ +10 +[0-9]+ +[0-9]+ +[0-9]+ +100.0% +1.0000$" "$t/o"
check "  fidelity grows with the groups" awk '$1 ~ /^[0-9]+$/ && NF == 6 { if ($6 + 0 < last) bad = 1; last = $6 + 0 } END { exit bad }' "$t/o"
total=$(awk '/^ +10 / { print $4 }' "$t/o")
g1=$(awk '/^ +1 / { print $4 }' "$t/o")
g5=$(awk '/^ +5 / { print $4 }' "$t/o")

check "every image identical to its source at the last group" expect_run 0 "$t/o" "$rckpt" pcr verify --dataset "$ds" --threads 2 "$src"
check "  all $n of them" contains "$t/o" "$n identical, 0 different"

# bytes moved: the index, then each record's head and groups 1..k
idx=$("$rckpt" pcr get --dataset "$ds" --ids 0 --out "$t/one" | sed 's/.*: \([0-9.]*\) MB read.*/\1/')
for k in 1 5 all; do
	check "get at group $k" expect_run 0 "$t/o" "$rckpt" pcr get --dataset "$ds" --group $k --out "$t/g$k"
	check "  writes every image under its name" test "$(ls "$t/g$k" | wc -l)" -eq "$n"
	read_mb=$(sed 's/.*: \([0-9.]*\) MB read.*/\1/' "$t/o")
	case $k in 1) want=$g1 ;; 5) want=$g5 ;; all) want=$total ;; esac
	check "  reads the head and groups 1..$k only (±1%)" awk -v r="$read_mb" -v w="$want" -v i="$idx" \
		'BEGIN { d = r * 1e6 - w; exit !(d > -0.01 * w && d < 0.01 * w + i * 1e6 + 1e4) }'
done
# the records as stored, decoded by the reference decoder (written from
# pcr.md alone, no code shared with the C reader): the same JPEGs, byte for byte
mkdir -p "$t/recs"
for r in $(rados -p rckpt -N "pcr/$ds" ls | grep '^rec\.' | sort); do rados -p rckpt -N "pcr/$ds" get "$r" "$t/recs/$r"; done
rados -p rckpt -N "pcr/$ds" get index "$t/index"
ref() { /usr/bin/python3 "$(dirname "$0")/../reference/rckpt_ref.py" "$@"; }
for k in 1 5 all; do
	check "the reference decoder's images at group $k" ref pcr --group $k -o "$t/ref$k" "$t"/recs/rec.*
	check "  are the C reader's, byte for byte" diff -r -q "$t/ref$k" "$t/g$k"
done
check "  and the index holds together (reference decoder)" /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$(dirname "$0")/../reference'); import rckpt_ref as R
x = R.pcr_index(open('$t/index', 'rb').read())
assert x['images'] == $n and x['records'] == $(((n + 511) / 512)), (x['images'], x['records'])"
check "group 1 reads under a fifth of group 5's bytes" awk -v a="$g1" -v b="$g5" 'BEGIN { exit !(a < b / 5) }'
check "group 5 reads under 60% of all" awk -v a="$g5" -v b="$total" 'BEGIN { exit !(a < 0.6 * b) }'

ids=3,1500,2999,3
check "fetch images through the OSD" expect_run 0 "$t/o" "$rckpt" pcr get --dataset "$ds" --group 1 --ids $ids --out "$t/f1"
check "  moves a few KB, not the prefix" awk -v r="$(sed 's/.*: \([0-9.]*\) MB read.*/\1/' "$t/o")" -v w="$g1" -v i="$idx" 'BEGIN { exit !((r - i) * 1e6 < w / 100) }'
same=1
for f in img-00003.jpg img-01500.jpg img-02999.jpg; do
	cmp -s "$t/f1/$f" "$t/g1/$f" || { same=0; echo "  $f differs" >&2; }
done
check "  the same JPEGs as cut from a ranged read" test $same = 1
check "an image past the data set: exit 1" expect_run 1 "$t/o" "$rckpt" pcr get --dataset "$ds" --ids $n --out "$t/f2"
check "  says so" contains "$t/o" "has $n images"

# refusals: nothing is stored
mkdir -p "$t/bad"
cp "$src/img-00000.jpg" "$src/img-00001.jpg" "$t/bad/"
echo "not a picture" >"$t/bad/notes.txt"
head -c 3000 "$src/img-00002.jpg" >"$t/bad/cut.jpg"
check "a non-JPEG stops the build" expect_run 1 "$t/o" "$rckpt" pcr build --dataset "$ds-bad" "$t/bad"
check "  naming the file" contains "$t/o" "cut.jpg: corrupt JPEG (Premature end of JPEG file)"
check "  and leaves no dataset" expect_run 1 "$t/o2" "$rckpt" pcr stat --dataset "$ds-bad"
check "--skip-bad leaves them out" expect_run 0 "$t/o" "$rckpt" pcr build --dataset "$ds-bad" --skip-bad "$t/bad"
check "  both reported" contains "$t/o" "notes.txt: not a JPEG"
check "  (and the other)" contains "$t/o" "cut.jpg: corrupt JPEG"
check "  2 images in" contains "$t/o" "2 images (2 skipped)"
check "  which verify" expect_run 0 "$t/o" "$rckpt" pcr verify --dataset "$ds-bad" "$t/bad"
# the spectral-selection scan script: the same refusals, the same pixels
check "--scan-script spectral: a cut file stops the build" expect_run 1 "$t/o" "$rckpt" pcr build \
	--dataset "$ds-sp" --scan-script spectral "$t/bad/cut.jpg"
check "  naming it" contains "$t/o" "cut.jpg: corrupt JPEG (Premature end of JPEG file)"
check "--scan-script spectral --skip-bad: exit 0" expect_run 0 "$t/o" "$rckpt" pcr build --dataset "$ds-sp" \
	--scan-script spectral --skip-bad "$t/bad"
check "  10 groups" contains "$t/o" "2 images (2 skipped) in 1 records, 10 groups"
check "  which verify" expect_run 0 "$t/o" "$rckpt" pcr verify --dataset "$ds-sp" "$t/bad"
check "  and go" expect_run 0 "$t/o" "$rckpt" pcr rm --dataset "$ds-sp"
check "--scan-script fast: exit 2" expect_run 2 "$t/o" "$rckpt" pcr build --dataset "$ds-sp" --scan-script fast "$t/bad"
printf 'file,label\nimg-00000.jpg\n' >"$t/labels.csv"
check "a labels line without a comma: exit 1" expect_run 1 "$t/o" "$rckpt" pcr build --dataset "$ds-x" --labels "$t/labels.csv" "$t/bad"
check "  naming the line" contains "$t/o" "labels.csv:2"
check "bad usage: exit 2" expect_run 2 "$t/o" "$rckpt" pcr get --dataset "$ds" --group 0 --out "$t/x"

# a damaged record fails closed
pool=$(awk -F' *= *' '/^[[:space:]]*rckpt pool/ { print $2 }' "$CEPH_CONF" 2>/dev/null)
pool=${pool:-rckpt}
if rados -p "$pool" -N "pcr/$ds-bad" get rec.00000000 "$t/rec" 2>/dev/null; then
	size=$(stat -c %s "$t/rec")
	printf '\x00' | dd of="$t/rec" bs=1 seek=$((size - 10)) conv=notrunc 2>/dev/null
	cmp -s "$t/rec" <(rados -p "$pool" -N "pcr/$ds-bad" get rec.00000000 /dev/stdout 2>/dev/null) &&
		printf '\x01' | dd of="$t/rec" bs=1 seek=$((size - 10)) conv=notrunc 2>/dev/null
	rados -p "$pool" -N "pcr/$ds-bad" put rec.00000000 "$t/rec"
	check "a damaged record: exit 1" expect_run 1 "$t/o" "$rckpt" pcr get --dataset "$ds-bad" --out "$t/d"
	check "  says it is damaged" contains "$t/o" "is damaged"
else
	check "rados reads the record object" false
fi

check "rm" expect_run 0 "$t/o" "$rckpt" pcr rm --dataset "$ds"
check "  then it is gone" expect_run 1 "$t/o" "$rckpt" pcr stat --dataset "$ds"
check "  saying so" contains "$t/o" "no such dataset"
check "rm of nothing: exit 1" expect_run 1 "$t/o" "$rckpt" pcr rm --dataset "$ds"
finish
