#!/usr/bin/env bash
# enable-classes.sh — adds rckpt's object classes (rckpt, pcr) to the OSDs'
# class lists in the cluster's configuration database, keeping whatever
# the lists hold now: it reads them from the cluster (`ceph config get osd
# osd_class_load_list`, which is Ceph's default where nobody set one) and
# appends only the classes missing. Running it twice changes nothing.
# The OSDs load a class list at start: restart them afterwards.
set -euo pipefail
prog=${0##*/}

usage() {
	cat <<EOF
usage: $prog [--dry-run] [--conf PATH] [--classes "rckpt pcr"]

Adds the classes to osd_class_load_list and osd_class_default_list of the
cluster's configuration database ('ceph config set osd ...'), keeping the
lists' present entries and order. Needs the ceph tool and a user allowed to
change the configuration (client.admin).

  --dry-run        print the 'ceph config set' commands, change nothing
  --conf PATH      ceph.conf (default: \$CEPH_CONF, then Ceph's search path)
  --classes LIST   the classes to add (default: "rckpt pcr")
  -h, --help       this text
EOF
}
die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*; try '$prog --help'" >&2; exit 2; }

dry=0 conf=() classes="rckpt pcr"
while [ $# -gt 0 ]; do
	case $1 in
	--dry-run) dry=1; shift ;;
	--conf) [ $# -ge 2 ] || usage_error "--conf needs a value"; conf=(-c "$2"); shift 2 ;;
	--classes) [ $# -ge 2 ] || usage_error "--classes needs a value"; classes=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
done
for c in $classes; do
	[[ "$c" =~ ^[A-Za-z0-9_]+$ ]] || usage_error "'$c' is not a class name"
done
command -v ceph >/dev/null || die "the ceph tool is missing (ceph-common)"

for opt in osd_class_load_list osd_class_default_list; do
	now=$(ceph "${conf[@]}" --connect-timeout 30 config get osd "$opt") ||
		die "cannot read $opt from the cluster"
	new=$now
	if [ "$(echo "$now" | tr -d '[:space:]')" = "*" ]; then
		echo "$opt is '*' (every class): nothing to add"
		continue
	fi
	for c in $classes; do
		case " $new " in *" $c "*) ;; *) new=${new:+$new }$c ;; esac
	done
	if [ "$new" = "$now" ]; then
		echo "$opt has $classes already: unchanged"
		continue
	fi
	if [ "$dry" = 1 ]; then
		printf 'ceph config set osd %s %q\n' "$opt" "$new"
	else
		ceph "${conf[@]}" --connect-timeout 30 config set osd "$opt" "$new" ||
			die "cannot set $opt (a user allowed to change the configuration is needed)"
		echo "$opt: $new"
	fi
done
[ "$dry" = 1 ] || echo "restart the OSDs, one at a time, to load the classes; then 'rckpt status'"
