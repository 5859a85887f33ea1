/*
 * exit_race.c — what a process risks when it exits with a connected handle.
 *
 * librados runs threads of its own (timer, messengers). A process that
 * returns from main or calls exit() with a client still connected runs its
 * static destructors while those threads still use what they destroy, and
 * now and then dies of it: SIGSEGV or SIGABRT after its work was done, which
 * every job scheduler reports as a failed job. rckpt_destroy shuts the
 * client down first (rckpt.h says to call it before exit).
 *
 * Each run is a forked child that connects (rckpt_connect), asks the plugin
 * its version a few times, and exits: case A without rckpt_destroy, case B
 * with it. The cases alternate (A B A B) so the machine's load hits both
 * alike. Prints each case's deaths by signal out of its runs.
 *
 * usage: exit_race [--conf PATH] [--runs N]   (default: $CEPH_CONF, 200)
 */
#define _GNU_SOURCE /* getopt_long */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rckpt.h"

/* The child: 0 when it got to its exit; 2 when it could not connect. */
static int child(const char *conf, int destroy)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	rckpt_plugin_info_t info;
	rckpt_t *h;
	int i;

	o.conf_path = conf;
	o.timeout_s = 20;
	if (rckpt_create(&h) || rckpt_connect(h, &o)) {
		fprintf(stderr, "exit_race: cannot connect: %s\n", rckpt_errmsg(h));
		return 2;
	}
	for (i = 0; i < 4; i++)
		(void)rckpt_plugin_version(h, &info, "rckpt");
	if (destroy)
		rckpt_destroy(h);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "conf", required_argument, NULL, 'c' },
					      { "runs", required_argument, NULL, 'n' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	const char *conf = getenv("CEPH_CONF");
	long runs = 200;
	unsigned died[2] = { 0, 0 }, sig[2][NSIG];
	long r;
	int c, k;

	memset(sig, 0, sizeof(sig));
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			conf = optarg;
			break;
		case 'n':
			runs = strtol(optarg, NULL, 10);
			if (runs < 1 || runs > 100000) {
				fprintf(stderr, "exit_race: --runs wants 1..100000\n");
				return 2;
			}
			break;
		case 'h':
			printf("usage: exit_race [--conf PATH] [--runs N]\n"
			       "Forks N children of each case, alternating: A exits with its handle\n"
			       "connected, B calls rckpt_destroy first. Prints deaths by signal.\n");
			return 0;
		default:
			return 2;
		}
	}
	for (r = 0; r < runs; r++) {
		for (k = 0; k < 2; k++) {
			int st;
			pid_t p = fork();
			if (p < 0) {
				perror("exit_race: fork");
				return 1;
			}
			if (p == 0)
				exit(child(conf, k));
			if (waitpid(p, &st, 0) != p)
				return 1;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
				return 1; /* no cluster: said by the child */
			if (WIFSIGNALED(st)) {
				died[k]++;
				sig[k][WTERMSIG(st)]++;
			}
		}
		if ((r + 1) % 50 == 0)
			fprintf(stderr, "exit_race: %ld of %ld runs of each case\n", r + 1, runs);
	}
	for (k = 0; k < 2; k++) {
		printf("%s: %u of %ld exits died of a signal", k ? "B rckpt_destroy first  "
							      : "A handle left connected",
		       died[k], runs);
		for (c = 1; c < NSIG; c++)
			if (sig[k][c])
				printf(", %s %u", sigabbrev_np(c), sig[k][c]);
		printf("\n");
	}
	return 0;
}
