/*
 * rckpt_cli_pcr.c — `rckpt pcr build | get | verify | ls | stat | rm`: JPEG
 * datasets as Progressive Compressed Records in the cluster (librckpt's
 * PCR API). This file holds the help and the table of subcommands, the
 * top of the pcr files; each subcommand lives in a cli_pcr_*.c of its own
 * (build, get, verify, and ls, stat and rm together) over what they share
 * (cli_pcr_util.c).
 */
#include "cli_pcr.h"

static const char help_text[] =
	"usage: rckpt [options] pcr build --dataset D [--labels LABELS.csv] [--images-per-record N]\n"
	"                                [--threads N] [--fidelity-sample N] [--skip-bad]\n"
	"                                [--scan-script default|spectral] DIR|FILE...\n"
	"       rckpt [options] pcr get --dataset D [--group K|all] [--ids I,J,...] --out DIR\n"
	"       rckpt [options] pcr verify --dataset D [--threads N] DIR\n"
	"       rckpt [options] pcr ls\n"
	"       rckpt [options] pcr stat --dataset D\n"
	"       rckpt [options] pcr rm --dataset D\n"
	"\n"
	"build  rewrite JPEG files losslessly as progressive JPEGs and store them as\n"
	"       dataset D: records of --images-per-record images (default 512), scans\n"
	"       regrouped so that reading a record through group K gives each image at\n"
	"       fidelity K. A DIR adds its regular files (not hidden ones, not the labels\n"
	"       file), in name order. LABELS.csv has lines FILE,LABEL (a first line\n"
	"       'file,label' is skipped); a label is kept as bytes with its image. A file\n"
	"       that is not a usable JPEG stops the build, naming it, unless --skip-bad\n"
	"       (then it is reported and left out). SSIM per group is measured on\n"
	"       --fidelity-sample images (default 64). --scan-script spectral writes\n"
	"       scans of spectral selection alone: prefixes decode faster, fidelity\n"
	"       grows more slowly at the low groups (default: libjpeg's script).\n"
	"       Refused if D exists.\n"
	"get    read D through K groups (default all) and write each image, as a\n"
	"       JPEG under its original file name, into DIR; --ids fetches only those\n"
	"       images (numbered from 0 in build order), gathered in the OSDs.\n"
	"verify read D at every group, decode each image (on --threads threads, default\n"
	"       1) and compare its pixels with those of the file of the same name in DIR\n"
	"       (the build's sources); exit 1 on any difference or missing file.\n"
	"ls     list the datasets of the pool.\n"
	"stat   bytes, images and mean SSIM per group of D.\n"
	"rm     delete D and all its objects.\n"
	"\n"
	"On a terminal, build shows a progress line on stderr.\n";

int rckpt_cli_pcr(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const cli_sub_t subs[] = {
		{ "build", pcr_cmd_build }, { "get", pcr_cmd_get },   { "verify", pcr_cmd_verify },
		{ "ls", pcr_cmd_ls },	    { "stat", pcr_cmd_stat }, { "rm", pcr_cmd_rm },
	};
	return cli_dispatch("pcr", help_text, subs, sizeof(subs) / sizeof(subs[0]), argc, argv, conn);
}
