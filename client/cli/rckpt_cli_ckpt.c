/*
 * rckpt_cli_ckpt.c — `rckpt ckpt`: its help and its table of
 * subcommands, the top of the ckpt files. Each subcommand lives in a
 * cli_ckpt_*.c of its own (save, restore, export, ls and jobs, the
 * housekeeping of one job, and `rckpt compact --all`) over what they
 * share (cli_ckpt_util.c); all go through librckpt's public job API.
 */
#include "cli_ckpt.h"

static const cli_sub_t subs[] = {
	{ "save", ckpt_cmd_save,
	  "--job J [--step N] [--eps E] [--exact] [--lease S]\n"
	  "[--takeover | --no-takeover] [--wait S]\n"
	  "[--chunk-params N] [--mem-budget MIB]\n"
	  "[--grads G.safetensors] MODEL.safetensors...",
	  "compress and commit checkpoints into job J (a namespace of the pool, 1..63\n"
	  "characters of A-Z a-z 0-9 . _ -, the first not . or -), in the order given,\n"
	  "each as the step its file name ends with (step-000025 is step 25), or from\n"
	  "--step N on (N, N+1, ...). Each step is a delta against the one before, the\n"
	  "first too when the job has a committed head of the same tensors (its levels\n"
	  "come from the OSDs); a step whose tensors differ is a base in a new layout.\n"
	  "The gradient RMS that weighs errors comes from --grads (one file only) or a\n"
	  "sibling MODEL.grads.safetensors;\n"
	  "--eps bounds the Fisher-weighted relative error, in (0, 1) (default 0.0012:\n"
	  "see 'rckpt codec --help'). --exact stores the steps bit-exact: every value\n"
	  "whole, its bytes in planes (the exponent's Huffman-coded), each exact\n"
	  "step a delta on the exact step before; their restores match the files'\n"
	  "SHA-256. An optimizer's state beside a model, MODEL.optim.safetensors\n"
	  "(exp_avg.P, exp_avg_sq.P: Adam's moments of P; momentum_buffer.P; other\n"
	  "tensors), is saved as the step's optimizer state: compressed apart, judged\n"
	  "by the error of the update it makes (README \"Adam's state\"). A sibling\n"
	  "MODEL.state (what 'restore' writes: the step's non-tensor state) is\n"
	  "attached to the step as it is.\n"
	  "Every file is checked before the job is touched.\n"
	  "Takes the job's writer lock. When another writer holds it: by default\n"
	  "taken over at once if that writer was a process of this machine that\n"
	  "has exited (a restart after a crash); --takeover takes it over at once\n"
	  "whoever holds it (the old writer's requests are fenced: nothing it still\n"
	  "sends can change the job), --no-takeover never; otherwise it waits up to\n"
	  "--wait seconds (default 0), then fails naming the holder. A dead\n"
	  "writer's lock expires --lease seconds (default 30) after its last save.\n"
	  "SIGINT (Ctrl-C) or SIGTERM releases the lock at once and ends it\n"
	  "(exit 130, 143): the steps it printed are committed, the next not.\n"
	  "--mem-budget (default 256 MiB)\n"
	  "bounds what a save holds beyond the encoder's state of one byte per\n"
	  "parameter, whatever the model's size; chunks hold --chunk-params\n"
	  "parameters (default and most: 4 Mi). Prints each step's ratio and timings." },
	{ "restore", ckpt_cmd_restore,
	  "--job J [--step N] [--tensors a,b] -o OUT.safetensors",
	  "materialize a committed step (default: the latest) in the OSDs, check\n"
	  "every chunk's SHA-256, and write its tensors (or only those --tensors\n"
	  "names, reading only the chunks that hold them) to OUT.safetensors, its\n"
	  "optimizer's state, if it has one, to OUT.optim.safetensors: the\n"
	  "compressed tensors and those the step keeps exact (a -inf mask, integer\n"
	  "buffers, step counts), so a strict load_state_dict takes OUT. The rest\n"
	  "of its attachment, if it has one (the non-tensor state a trainer keeps:\n"
	  "a scheduler, RNG states, the epoch, param groups; the Python binding's\n"
	  "format, rckpt._plain.loads), goes to OUT.state, references in place of\n"
	  "the tensors moved to the files (ckpt save puts them back). The files are\n"
	  "written whole or not at all; siblings of OUT from before that the step\n"
	  "does not have are removed.\n"
	  "When the OSDs lack the rckpt class (or refuse it), the chains are\n"
	  "folded here instead, to the same bytes, slower; it says so." },
	{ "export", ckpt_cmd_export,
	  "--job J [--step N] [--from-dump FILE] -o DIR",
	  "write every listed step (or step N) of job J to DIR/step-NNNNNN.safetensors,\n"
	  "folding each chain here, without the OSDs' rckpt class; with --from-dump,\n"
	  "from a file that `rados -p POOL --all export FILE` wrote, with no cluster\n"
	  "at all. DIR is made if it does not exist." },
	{ "ls", ckpt_cmd_ls,
	  "--job J",
	  "list the committed steps as they were saved (kind, size, ratio, and\n"
	  "the weights' and the optimizer state's bytes and ratios apart, but for\n"
	  "exact steps, which are not split; a compaction rewrites them\n"
	  "later), what the job stores now, and its retention policy." },
	{ "jobs", ckpt_cmd_jobs,
	  "",
	  "list the jobs of the pool: committed steps, the head step, the bytes\n"
	  "each stores now." },
	{ "compact", ckpt_cmd_compact,
	  "--job J [--keep-last N] [--keep-every M]",
	  "apply the retention policy (--keep-last N newest steps, --keep-every M:\n"
	  "steps that are multiples of M; the head and pinned steps always stay; given\n"
	  "options are stored as the job's policy) and rewrite the chunks so that the\n"
	  "latest step is a base. Safe beside a running writer, and to repeat." },
	{ "pin", ckpt_cmd_pin,
	  "--job J --step N [--exact | --off]",
	  "keep step N whatever the policy (--off: unpin it); --exact: a milestone\n"
	  "that must stay bit-exact, refused for a step not saved with --exact." },
	{ "rewind", ckpt_cmd_rewind,
	  "--job J --step N [--branch NAME] [--takeover] [--wait S]",
	  "move the head back to committed step N (a loss spike: restore N, skip\n"
	  "some batches, save N+1 anew). The later steps are forgotten at once;\n"
	  "the next save trims their records and 'gc' removes the rest; with\n"
	  "--branch NAME they are first copied (with N) into job J.NAME, which\n"
	  "'ls' lists. Takes the writer lock; refused past a pinned step. A writer\n"
	  "restarted later goes on from N." },
	{ "branch", ckpt_cmd_branch,
	  "--job J --step N [--upto M] --to NEWJOB",
	  "start NEWJOB from step N of job J (through --upto M), copied once (a\n"
	  "chain lives in one object): fine-tune from a checkpoint, then save on\n"
	  "into NEWJOB." },
	{ "verify", ckpt_cmd_verify,
	  "--job J [--deep]",
	  "check every stored record's CRC in the OSDs and every step's manifest;\n"
	  "--deep also materializes every committed step and checks each chunk's\n"
	  "SHA-256; exit 1 when anything is damaged." },
	{ "gc", ckpt_cmd_gc,
	  "--job J [--takeover] [--wait S]",
	  "remove what no committed step uses (a crashed writer's records and\n"
	  "manifests); refused while a writer holds the job." },
	{ "rm", ckpt_cmd_rm,
	  "--job J [--step N]",
	  "delete job J and all its objects (refused while a writer holds it), or\n"
	  "with --step N forget that one step (not the head, not a pinned one)." },
};

static const cli_cmd_t command = {
	"ckpt", subs, sizeof(subs) / sizeof(subs[0]),
	"On a terminal, save, restore, export and compact show a progress line on stderr.\n"
	"'rckpt compact --all' compacts every job of the pool under its own policy.",
};

int rckpt_cli_ckpt(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	return cli_dispatch(&command, argc, argv, conn);
}
