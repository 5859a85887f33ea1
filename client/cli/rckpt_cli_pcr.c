/*
 * rckpt_cli_pcr.c — `rckpt pcr build | get | verify | ls | stat | rm`: JPEG
 * datasets as Progressive Compressed Records in the cluster (librckpt's
 * PCR API). This file holds the help and the table of subcommands, the
 * top of the pcr files; each subcommand lives in a cli_pcr_*.c of its own
 * (build, get, verify, and ls, stat and rm together) over what they share
 * (cli_pcr_util.c).
 */
#include "cli_pcr.h"

static const cli_sub_t subs[] = {
	{ "build", pcr_cmd_build,
	  "--dataset D [--labels LABELS.csv] [--images-per-record N]\n"
	  "[--threads N] [--fidelity-sample N] [--skip-bad]\n"
	  "[--scan-script default|spectral] DIR|FILE...",
	  "rewrite JPEG files losslessly as progressive JPEGs and store them as\n"
	  "dataset D: records of --images-per-record images (default 512), scans\n"
	  "regrouped so that reading a record through group K gives each image at\n"
	  "fidelity K. A DIR adds its regular files (not hidden ones, not the\n"
	  "labels file), in name order. LABELS.csv has lines FILE,LABEL (a first\n"
	  "line 'file,label' is skipped); a label is kept as bytes with its image.\n"
	  "A file that is not a usable JPEG stops the build, naming it, unless\n"
	  "--skip-bad (then it is reported and left out). SSIM per group is\n"
	  "measured on --fidelity-sample images (default 64). --scan-script\n"
	  "spectral writes scans of spectral selection alone: prefixes decode\n"
	  "faster, fidelity grows more slowly at the low groups (default: libjpeg's\n"
	  "script). Refused if D exists." },
	{ "get", pcr_cmd_get,
	  "--dataset D [--group K|all] [--ids I,J,...] --out DIR",
	  "read D through K groups (default all) and write each image, as a\n"
	  "JPEG under its original file name, into DIR; --ids fetches only those\n"
	  "images (numbered from 0 in build order), gathered in the OSDs." },
	{ "verify", pcr_cmd_verify,
	  "--dataset D [--threads N] DIR",
	  "read D at every group, decode each image (on --threads threads, default\n"
	  "1) and compare its pixels with those of the file of the same name in DIR\n"
	  "(the build's sources); exit 1 on any difference or missing file." },
	{ "ls", pcr_cmd_ls,
	  "",
	  "list the datasets of the pool." },
	{ "stat", pcr_cmd_stat,
	  "--dataset D",
	  "bytes, images and mean SSIM per group of D." },
	{ "rm", pcr_cmd_rm,
	  "--dataset D",
	  "delete D and all its objects." },
};

static const cli_cmd_t command = {
	"pcr", subs, sizeof(subs) / sizeof(subs[0]),
	"On a terminal, build shows a progress line on stderr.",
};

int rckpt_cli_pcr(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	return cli_dispatch(&command, argc, argv, conn);
}
