#!/usr/bin/env bash
# test_caps.sh RCKPT CAPS-SCRIPT — the cephx roles of ceph-conf/rckpt-caps.sh
# on the cluster named by CEPH_CONF: each user can do exactly what its role
# allows, and every refusal is cephx's ("Operation not permitted"), not some
# other failure. A trainer saves and compacts its own job and nothing of
# another's; a reader (of one job, or --all) lists and restores (bit-exactly)
# but cannot save, compact or delete; a compactor compacts every job
# (removing dropped steps' manifest objects, counted in RADOS) but cannot
# save or delete a job; a PCR reader reads its dataset only, and writes none.
# Exit 77 (skipped) without a cluster, the ceph CLI, real checkpoints or photos.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
caps=$2
need_cluster
command -v ceph >/dev/null || skip_test cluster "no ceph CLI (ceph-common; ./dev.sh test installs it)"
need_real_checkpoints
[ -d "${RCKPT_TEST_PCR_DIR:-}" ] || skip_test data "no photo data set (RCKPT_TEST_PCR_DIR: the make_test_pcr_images fixture)"
src=$RCKPT_TEST_CKPT_DIR
t=$(mktemp -d)
id=$$
job=caps-$id
other=caps-other-$id
users=(t-trainer-$id t-reader-$id t-compactor-$id t-pcr-$id t-readall-$id)
cleanup() {
	for u in "${users[@]}"; do ceph auth del "client.$u" >/dev/null 2>&1; done
	"$rckpt" ckpt rm --job "$job" >/dev/null 2>&1
	"$rckpt" ckpt rm --job "$other" >/dev/null 2>&1
	"$rckpt" pcr rm --dataset "caps-$id" >/dev/null 2>&1
	"$rckpt" pcr rm --dataset "caps-other-$id" >/dev/null 2>&1
	rm -rf "$t"
}
trap cleanup EXIT
mapfile -t ckpts < <(model_files "$src" | head -6)

# The test users' keyrings live here, named by a conf of their own.
mkdir -p "$t/keyring"
sed '/^[[:space:]]*keyring[[:space:]]*=/d' "$CEPH_CONF" >"$t/ceph.conf"
sed -i "0,/^\[global\]/s||[global]\n\tkeyring = $t/keyring/\$name.keyring|" "$t/ceph.conf"
as() { local u=$1; shift; CEPH_CONF=$t/ceph.conf "$rckpt" --id "$u" "$@"; }
mk() { "$caps" -o "$t/keyring/client.$2.keyring" "$@" 2>/dev/null; }
# refused CMD...: exits 1, and says cephx refused it (a keyring error or a
# missing object would fail too, and must not pass)
refused() { expect_run 1 "$t/o" "$@" && contains "$t/o" "Operation not permitted"; }
manifests() { rados -p rckpt -N "$1" ls 2>/dev/null | grep -c '^rckpt\.manifest\.'; }

check "admin saves job A (4 steps)" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[@]:0:4}"
check "admin saves job B" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$other" "${ckpts[0]}"
check "admin restores A" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/admin.safetensors"
check "--print shows the command" expect_run 0 "$t/o" "$caps" --print reader x "$job"
check "  ceph auth get-or-create" contains "$t/o" "auth' 'get-or-create' 'client.x'"
check "a bad role is refused" expect_run 2 "$t/o" "$caps" --print nobody x

# trainer of A
u=${users[0]}
check "make a trainer of A" mk trainer "$u" "$job"
check "trainer saves A" expect_run 0 "$t/o" as "$u" ckpt save --job "$job" "${ckpts[4]}"
check "trainer compacts A" expect_run 0 "$t/o" as "$u" ckpt compact --job "$job"
check "trainer cannot save B" refused as "$u" ckpt save --job "$other" "${ckpts[1]}"
check "trainer cannot read B" refused as "$u" ckpt restore --job "$other" -o "$t/x.safetensors"
check "trainer cannot compact B" refused as "$u" ckpt compact --job "$other" --keep-last 1
check "trainer cannot delete B" refused as "$u" ckpt rm --job "$other"
check "B is untouched" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$other"
check "  one step" contains "$t/o" "1 step,"

# reader of A
u=${users[1]}
check "make a reader of A" mk reader "$u" "$job"
check "reader lists A" expect_run 0 "$t/o" as "$u" ckpt ls --job "$job"
check "  5 steps" contains "$t/o" "5 steps"
check "reader restores A's 4th step" expect_run 0 "$t/o" as "$u" ckpt restore --job "$job" --step "$(stepof "${ckpts[3]}")" -o "$t/reader.safetensors"
check "  the admin's bytes" cmp -s "$t/admin.safetensors" "$t/reader.safetensors"
check "reader cannot save A" refused as "$u" ckpt save --job "$job" "${ckpts[1]}"
check "reader cannot compact A" refused as "$u" ckpt compact --job "$job" --keep-last 1
check "reader cannot delete A" refused as "$u" ckpt rm --job "$job"
check "reader cannot read B" refused as "$u" ckpt ls --job "$other"
check "A still has 5 steps" expect_run 0 "$t/o" "$rckpt" ckpt ls --job "$job"
check "  5 steps" contains "$t/o" "5 steps"

# reader of every job
u=${users[4]}
check "make a reader of every job" mk reader "$u" --all
check "reader --all lists A" expect_run 0 "$t/o" as "$u" ckpt ls --job "$job"
check "  5 steps" contains "$t/o" "5 steps"
check "reader --all restores B" expect_run 0 "$t/o" as "$u" ckpt restore --job "$other" -o "$t/rb.safetensors"
check "reader --all cannot save B" refused as "$u" ckpt save --job "$other" "${ckpts[1]}"
check "reader --all cannot compact A" refused as "$u" ckpt compact --job "$job" --keep-last 1
check "reader --all cannot delete B" refused as "$u" ckpt rm --job "$other"

# compactor: every job
u=${users[2]}
check "make a compactor" mk compactor "$u"
check "admin sets A's policy: keep the last 2" expect_run 0 "$t/o" "$rckpt" ckpt compact --job "$job" --keep-last 2
check "admin saves a step more" expect_run 0 "$t/o" "$rckpt" ckpt save --job "$job" "${ckpts[5]}"
check "  A has 3 manifest objects before (2 kept, 1 new)" test "$(manifests "$job")" -eq 3
check "compactor compacts A under its policy" expect_run 0 "$t/o" as "$u" ckpt compact --job "$job"
check "  dropped steps' manifest objects removed: 2 left in RADOS" test "$(manifests "$job")" -eq 2
check "compactor runs gc" expect_run 0 "$t/o" as "$u" ckpt gc --job "$job"
check "compactor compacts a second job, B" expect_run 0 "$t/o" as "$u" ckpt compact --job "$other"
check "compactor cannot save" refused as "$u" ckpt save --job "$other" "${ckpts[1]}"
check "compactor cannot delete a job" refused as "$u" ckpt rm --job "$other"
check "compactor cannot write a chunk object" bash -c "! CEPH_CONF='$t/ceph.conf' rados -p rckpt -N '$other' --id '$u' put rckpt.chunk.00000 /dev/null 2>/dev/null"
check "B still restores" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$other" -o "$t/b.safetensors"
check "admin restores A's head" expect_run 0 "$t/o" "$rckpt" ckpt restore --job "$job" -o "$t/head.safetensors"
check "admin verifies A" expect_run 0 "$t/o" "$rckpt" ckpt verify --job "$job"

# PCR reader
u=${users[3]}
check "admin builds a dataset" expect_run 0 "$t/o" "$rckpt" pcr build --dataset "caps-$id" \
	"$RCKPT_TEST_PCR_DIR"/img-0000[0-9].jpg
check "make a PCR reader of it" mk pcr-reader "$u" "caps-$id"
check "PCR reader reads it" expect_run 0 "$t/o" as "$u" pcr get --dataset "caps-$id" --group 1 --out "$t/pcr"
check "PCR reader cannot delete it" refused as "$u" pcr rm --dataset "caps-$id"
# a plain write into its dataset's namespace: refused by cephx
write_refused() {
	local out
	! out=$(CEPH_CONF=$t/ceph.conf rados -p rckpt -N "pcr/caps-$id" --id "$u" put pcr.extra /etc/hostname 2>&1) &&
		grep -q 'Operation not permitted' <<<"$out"
}
check "PCR reader cannot write into it" write_refused
check "  it is as it was" expect_run 0 "$t/o" "$rckpt" pcr get --dataset "caps-$id" --group 1 --out "$t/pcr2"
check "  (the same images)" bash -c "diff -r '$t/pcr' '$t/pcr2' >/dev/null"
check "admin builds another dataset" expect_run 0 "$t/o" "$rckpt" pcr build --dataset "caps-other-$id" \
	"$RCKPT_TEST_PCR_DIR"/img-0002[0-9].jpg
check "PCR reader cannot read the other dataset" refused as "$u" pcr get --dataset "caps-other-$id" --group 1 --out "$t/pcr3"
check "PCR reader cannot read job A" refused as "$u" ckpt ls --job "$job"
finish
