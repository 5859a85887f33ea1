#!/usr/bin/env bash
# rckpt-caps.sh — cephx users for rckpt, by role, as `ceph auth` commands.
#
#   rckpt-caps.sh [--pool P] [--print] [-o KEYRING] trainer   NAME JOB
#   rckpt-caps.sh [--pool P] [--print] [-o KEYRING] reader    NAME JOB|--all
#   rckpt-caps.sh [--pool P] [--print] [-o KEYRING] compactor NAME
#   rckpt-caps.sh [--pool P] [--print] [-o KEYRING] pcr-reader NAME DATASET
#
# Creates client.NAME (ceph auth get-or-create; an existing user gets the
# caps with ceph auth caps) and writes its keyring to KEYRING (default: on
# stdout). --print prints the command instead of running it. Roles:
#
#   trainer    reads and writes job JOB (its namespace; rckpt object-class
#              methods included) and the pool's preemption history object
#              (the adaptive policy); nothing else
#   reader     reads job JOB (or every job: --all) and restores it
#              (materialize, a read method); no write of any kind
#   compactor  every job of the pool, through the plugin only: its read
#              methods, and of its write methods only compact, drop and
#              retire (compaction and retention) and claim, trim and the
#              lock class (gc, which takes the writer lock); no plain write
#              and no append, commit or put: it cannot save a step or
#              write an object plainly; misused, its methods can still
#              destroy any job of the pool (below)
#   pcr-reader reads PCR dataset DATASET (namespace pcr/DATASET)
#
# Ceph grants by pool, namespace and object-name prefix; object-class
# calls by class-read and class-write, or by class and method ("allow
# pool=P class rckpt compact"), which is how the compactor gets only its
# own. Those methods are still enough to destroy any job of the pool
# (claim with the delete flag, retire its objects, trim its chunks): the
# plugin cannot tell misuse from compaction and gc. The compactor role,
# like class-write on a pool, is full control of the pool's jobs: give it
# to an operator's job, never to users (ceph-conf/README.md).
set -euo pipefail

prog=rckpt-caps.sh
pool=rckpt
print=0
out=-
die() { echo "$prog: $*" >&2; exit 2; }
usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
	case "$1" in
	--pool) pool=${2:?}; shift 2 ;;
	--print) print=1; shift ;;
	-o) out=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || { usage >&2; exit 2; }
role=$1 name=$2
valid() { [[ "$1" =~ ^[A-Za-z0-9._-]{1,63}$ ]]; }
valid "$name" || die "bad user name '$name'"
valid "$pool" || die "bad pool name '$pool'"

case "$role" in
trainer)
	[ $# -eq 3 ] && valid "$3" || die "trainer NAME JOB"
	osd="allow rwx pool=$pool namespace=$3, allow rw pool=$pool namespace=\"\" object_prefix rckpt.preemptions"
	;;
reader)
	[ $# -eq 3 ] || die "reader NAME JOB|--all"
	if [ "$3" = --all ]; then
		osd="allow r class-read pool=$pool"
	else
		valid "$3" || die "bad job name '$3'"
		osd="allow r class-read pool=$pool namespace=$3"
	fi
	;;
compactor)
	[ $# -eq 2 ] || die "compactor NAME"
	osd="allow r class-read pool=$pool"
	for m in compact drop retire claim trim; do
		osd+=", allow pool=$pool class rckpt $m"
	done
	osd+=", allow pool=$pool class lock"
	;;
pcr-reader)
	[ $# -eq 3 ] && valid "$3" || die "pcr-reader NAME DATASET"
	osd="allow r class-read pool=$pool namespace=pcr/$3"
	;;
*) die "unknown role '$role' (trainer, reader, compactor, pcr-reader)" ;;
esac

args=(auth get-or-create "client.$name" mon 'allow r' osd "$osd")
if [ "$print" = 1 ]; then
	printf 'ceph'
	printf " '%s'" "${args[@]}"
	printf '\n'
	exit 0
fi
# an existing user keeps its key and gets these caps
if ceph auth get "client.$name" >/dev/null 2>&1; then
	ceph auth caps "client.$name" mon 'allow r' osd "$osd" >/dev/null
	args=(auth get "client.$name")
fi
if [ "$out" = - ]; then
	ceph "${args[@]}"
else
	ceph "${args[@]}" -o "$out" 2>/dev/null
	echo "$prog: client.$name ($role) -> $out" >&2
fi
