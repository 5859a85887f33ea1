#!/usr/bin/env bash
# test_cli_args.sh RCKPT — the command line without a cluster: --help on
# every command, one-line errors and exit status 2 for bad usage.
set -u
. "$(dirname "$0")/../testlib.sh"
rckpt=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

check "rckpt --help exits 0 with usage" expect_run 0 "$t/o" "$rckpt" --help
check "  and lists the commands" contains "$t/o" "status"
for c in status call version; do
	check "rckpt $c --help exits 0" expect_run 0 "$t/o" "$rckpt" "$c" --help
	check "  and starts with usage" contains "$t/o" "usage: rckpt"
done
check "rckpt help exits 0" expect_run 0 "$t/o" "$rckpt" help

check "no command: exit 2" expect_run 2 "$t/o" "$rckpt"
check "  one line" lines "$t/o" 1
check "unknown command: exit 2" expect_run 2 "$t/o" "$rckpt" frobnicate
check "  names it in one line" contains "$t/o" "unknown command 'frobnicate'"
check "  one line" lines "$t/o" 1
check "unknown option: exit 2" expect_run 2 "$t/o" "$rckpt" --bogus status
check "  one line" lines "$t/o" 1
check "option without value: exit 2" expect_run 2 "$t/o" "$rckpt" status --pool
check "  (a global option after the command)" contains "$t/o" "option '--pool' needs a value"
check "status with an argument: exit 2" expect_run 2 "$t/o" "$rckpt" status extra
check "  (status takes no argument)" contains "$t/o" "unexpected argument"
# global options after the command (issue 30 item 4): applied, not passed on
check "--conf after the command is applied" expect_run 1 "$t/o" "$rckpt" status --conf "$t/none.conf"
check "  (it names that file)" contains "$t/o" "$t/none.conf"
check "--timeout=0 after the command is checked" expect_run 2 "$t/o" "$rckpt" ckpt ls --job j --timeout=0
check "  as a global option" contains "$t/o" "--timeout must be"
check "--version: exit 0" expect_run 0 "$t/o" "$rckpt" --version
check "  the version line" grep -qE '^librckpt [0-9]+\.[0-9]+\.[0-9]+' "$t/o"
# a subcommand's own help (issue 30 item 4)
check "ckpt ls --help: exit 0" expect_run 0 "$t/o" "$rckpt" ckpt ls --help
check "  its usage" contains "$t/o" "usage: rckpt [options] ckpt ls --job J"
check "  and no other subcommand's" bash -c "! grep -q 'ckpt save' '$t/o'"
check "  its paragraph" grep -q '^ls  *list the committed steps' "$t/o"
check "pcr build --help: its usage" bash -c "'$rckpt' pcr build --help | grep -q 'scan-script' && ! '$rckpt' pcr build --help | grep -q 'pcr get'"
check "ckpt --help: every subcommand" bash -c "'$rckpt' ckpt --help | grep -c 'rckpt \[options\] ckpt ' | grep -qx 12"
check "global option without value: exit 2" expect_run 2 "$t/o" "$rckpt" --conf
check "  says it needs a value" contains "$t/o" "needs a value"
check "bad timeout: exit 2" expect_run 2 "$t/o" "$rckpt" --timeout 0 status
check "  explains" contains "$t/o" "--timeout must be"
check "bad --read-from: exit 2" expect_run 2 "$t/o" "$rckpt" --read-from nearest status
check "  names the choices" contains "$t/o" "--read-from must be balance, primary or localize, not 'nearest'"
check "call without method: exit 2" expect_run 2 "$t/o" "$rckpt" call rckpt
check "  explains" contains "$t/o" "needs CLASS and METHOD"
check "call with bad option: exit 2" expect_run 2 "$t/o" "$rckpt" call --nope rckpt version
check "version with argument: exit 2" expect_run 2 "$t/o" "$rckpt" version extra

check "version needs no cluster" expect_run 0 "$t/o" "$rckpt" version
check "  prints the library version" contains "$t/o" "librckpt 0."
check "missing config: exit 1" expect_run 1 "$t/o" "$rckpt" --conf /nonexistent/ceph.conf status
check "  names the file" contains "$t/o" "/nonexistent/ceph.conf"
check "pcr --help: exit 0" expect_run 0 "$t/o" "$rckpt" pcr --help
check "  lists every subcommand" grep -q "pcr verify" "$t/o"
check "pcr without a subcommand: exit 2" expect_run 2 "$t/o" "$rckpt" pcr
check "pcr build without inputs: exit 2" expect_run 2 "$t/o" "$rckpt" pcr build --dataset d
check "pcr get --group 0: exit 2" expect_run 2 "$t/o" "$rckpt" pcr get --dataset d --group 0 --out "$t/x"
check "  says what is allowed" contains "$t/o" "1..64 or 'all'"
check "pcr get --ids junk: exit 2" expect_run 2 "$t/o" "$rckpt" pcr get --dataset d --ids 1,x --out "$t/x"
check "pcr build --images-per-record 0: exit 2" expect_run 2 "$t/o" "$rckpt" pcr build --dataset d --images-per-record 0 "$t"
# an option missing its value is named (issue 30 item 5)
check "ckpt ls --job without a value: exit 2" expect_run 2 "$t/o" "$rckpt" ckpt ls --job
check "  names the option" contains "$t/o" "option '--job' of ls needs a value"
check "ckpt ls --jobs (unknown): exit 2" expect_run 2 "$t/o" "$rckpt" ckpt ls --jobs x
check "  names it" contains "$t/o" "ls takes no option '--jobs'"
check "pcr stat --dataset without a value: exit 2" expect_run 2 "$t/o" "$rckpt" pcr stat --dataset
check "  names the option" contains "$t/o" "option '--dataset' of stat needs a value"
# a failed encode leaves no folder behind (issue 30 item 5)
echo "not safetensors" >"$t/bad.safetensors"
check "codec encode of a bad file: exit 1" expect_run 1 "$t/o" "$rckpt" codec encode -o "$t/enc" "$t/bad.safetensors"
check "  names the file" contains "$t/o" "$t/bad.safetensors: "
check "  leaves no folder" test ! -e "$t/enc"
mkdir "$t/enc2"
check "  nor removes one it did not make" bash -c "'$rckpt' codec encode -o '$t/enc2' '$t/bad.safetensors' 2>/dev/null; test -d '$t/enc2'"

finish
