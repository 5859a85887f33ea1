/*
 * cli_files.c — files named on the command line (cli.h): the checks
 * of inputs and outputs before any work, and outputs staged under
 * temporary names, which a signal removes (cli_signals.c).
 */
#define _GNU_SOURCE /* strdup, O_CLOEXEC, O_DIRECTORY */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"

#include "cli_lock.h"

static const char *kind_of(mode_t m)
{
	return S_ISDIR(m)    ? "a directory"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
			     : "a special file";
}

/* Reports the errno e of path and returns -e. */
static int file_err(const char *cmd, const char *path, int e, const char *what)
{
	cli_err(cmd, -e, "%s: %s%s", path, what ? what : "", strerror(e));
	return -e;
}

int cli_check_file(const char *cmd, const char *path)
{
	struct stat sb;
	int fd;
	if (stat(path, &sb) != 0)
		return file_err(cmd, path, errno, NULL);
	if (S_ISDIR(sb.st_mode)) {
		cli_err(cmd, -EISDIR, "%s: is a directory, not a file", path);
		return -EISDIR;
	}
	if (!S_ISREG(sb.st_mode)) {
		cli_err(cmd, -EINVAL, "%s: is %s, not a regular file", path, kind_of(sb.st_mode));
		return -EINVAL;
	}
	/* never blocks: it is not a FIFO */
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return file_err(cmd, path, errno, "cannot read it: ");
	close(fd);
	return 0;
}

int cli_check_safetensors(const char *cmd, const char *path)
{
	return cli_check_safetensors_flags(cmd, path, 0);
}

int cli_check_safetensors_flags(const char *cmd, const char *path, unsigned flags)
{
	char why[512] = "";
	int rc = cli_check_file(cmd, path);
	if (rc == 0 && (rc = rckpt_file_check_flags(path, flags, why, sizeof(why))) != 0)
		cli_err(cmd, rc, "%s: %s", path, why[0] ? why : rckpt_strerror(rc));
	return rc;
}

int cli_check_dir(const char *cmd, const char *path)
{
	struct stat sb;
	int fd;
	if (stat(path, &sb) != 0)
		return file_err(cmd, path, errno, NULL);
	if (!S_ISDIR(sb.st_mode)) {
		cli_err(cmd, -ENOTDIR, "%s: is %s, not a directory", path,
			S_ISREG(sb.st_mode) ? "a file" : kind_of(sb.st_mode));
		return -ENOTDIR;
	}
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return file_err(cmd, path, errno, "cannot read it: ");
	close(fd);
	return 0;
}

/* The directory of path (a copy; "." for a bare name), or NULL. */
static char *dir_of(const char *path)
{
	const char *sl = strrchr(path, '/');
	char *d;
	if (sl == NULL)
		return strdup(".");
	if (sl == path)
		return strdup("/");
	if ((d = malloc((size_t)(sl - path) + 1)) != NULL) {
		memcpy(d, path, (size_t)(sl - path));
		d[sl - path] = '\0';
	}
	return d;
}

/* Whether files may be made in directory d (which must exist): 0 or the
 * error reported about path. */
static int writable_dir(const char *cmd, const char *path, const char *d)
{
	struct stat sb;
	if (stat(d, &sb) != 0) {
		int e = errno;
		cli_err(cmd, -e, "%s: its directory %s: %s", path, d, strerror(e));
		return -e;
	}
	if (!S_ISDIR(sb.st_mode)) {
		cli_err(cmd, -ENOTDIR, "%s: %s is not a directory", path, d);
		return -ENOTDIR;
	}
	if (access(d, W_OK | X_OK) != 0) {
		int e = errno;
		cli_err(cmd, -e, "%s: cannot write in %s: %s", path, d, strerror(e));
		return -e;
	}
	return 0;
}

int cli_check_out(const char *cmd, const char *path)
{
	struct stat sb;
	char *d;
	int rc;
	if (*path == '\0') {
		cli_err(cmd, -ENOENT, "an empty output file name");
		return -ENOENT;
	}
	if (stat(path, &sb) == 0) {
		if (S_ISDIR(sb.st_mode)) {
			cli_err(cmd, -EISDIR, "%s: is a directory; the output is a file: give its name", path);
			return -EISDIR;
		}
		if (!S_ISREG(sb.st_mode)) {
			cli_err(cmd, -EINVAL, "%s: is %s, not a regular file to write", path, kind_of(sb.st_mode));
			return -EINVAL;
		}
	} else if (errno != ENOENT) {
		return file_err(cmd, path, errno, NULL);
	} else if (path[strlen(path) - 1] == '/') {
		cli_err(cmd, -EISDIR, "%s: names a directory; the output is a file: give its name", path);
		return -EISDIR;
	}
	if ((d = dir_of(path)) == NULL) {
		cli_err(cmd, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	rc = writable_dir(cmd, path, d);
	free(d);
	return rc;
}

int cli_check_out_dir(const char *cmd, const char *path)
{
	struct stat sb;
	char *d, *p;
	size_t n;
	int rc;
	if (stat(path, &sb) == 0) {
		if (!S_ISDIR(sb.st_mode)) {
			cli_err(cmd, -ENOTDIR, "%s: is %s, not a directory", path,
				S_ISREG(sb.st_mode) ? "a file" : kind_of(sb.st_mode));
			return -ENOTDIR;
		}
		if (access(path, W_OK | X_OK) != 0)
			return file_err(cmd, path, errno, "cannot write in it: ");
		return 0;
	}
	if (errno != ENOENT)
		return file_err(cmd, path, errno, NULL);
	/* to be made: its parent (without trailing slashes) must take it */
	if ((p = strdup(path)) == NULL) {
		cli_err(cmd, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	for (n = strlen(p); n > 1 && p[n - 1] == '/'; n--)
		p[n - 1] = '\0';
	d = dir_of(p);
	rc = d ? writable_dir(cmd, path, d) : -ENOMEM;
	free(d);
	free(p);
	return rc;
}

/* ---- staged outputs, and the temporaries a signal removes ---- */

#define CLI_TMP_MAX 16
static char *g_tmp[CLI_TMP_MAX]; /* registered temporaries (cli_lock) */

/* Removes tmp and the library's own temporary beside it (rckpt_file_write
 * writes PATH.tmp, then renames it to PATH). */
static void remove_tmp(const char *tmp)
{
	char t2[4096];
	unlink(tmp);
	if (snprintf(t2, sizeof(t2), "%s.tmp", tmp) < (int)sizeof(t2))
		unlink(t2);
}

void cli_tmp_remove_all_locked(void)
{
	unsigned i;
	for (i = 0; i < CLI_TMP_MAX; i++)
		if (g_tmp[i])
			remove_tmp(g_tmp[i]);
}

static void tmp_register(char *t, int on)
{
	unsigned i;
	cli_lock();
	for (i = 0; i < CLI_TMP_MAX; i++)
		if (on ? g_tmp[i] == NULL : g_tmp[i] == t) {
			g_tmp[i] = on ? t : NULL;
			break;
		}
	cli_unlock();
}

const char *cli_stage_add(cli_stage_t *st, const char *final)
{
	const char *base = strrchr(final, '/');
	size_t dl = base ? (size_t)(base + 1 - final) : 0, cap = strlen(final) + 48;
	char *t, *f;
	if (st->n == CLI_STAGE_MAX)
		return NULL;
	base = base ? base + 1 : final;
	t = malloc(cap);
	f = strdup(final);
	if (t == NULL || f == NULL) {
		free(t);
		free(f);
		return NULL;
	}
	snprintf(t, cap, "%.*s.%s.rckpt-%ld.tmp", (int)dl, final, base, (long)getpid());
	st->final[st->n] = f;
	st->tmp[st->n] = t;
	st->n++;
	tmp_register(t, 1);
	return t;
}

static void stage_free(cli_stage_t *st)
{
	unsigned i;
	for (i = 0; i < st->n; i++) {
		tmp_register(st->tmp[i], 0);
		free(st->tmp[i]);
		free(st->final[i]);
	}
	st->n = 0;
}

void cli_stage_abort(cli_stage_t *st)
{
	unsigned i;
	for (i = 0; i < st->n; i++)
		remove_tmp(st->tmp[i]);
	stage_free(st);
}

int cli_stage_commit(cli_stage_t *st, const char *cmd)
{
	unsigned i;
	int rc = 0;
	for (i = 0; i < st->n && rc == 0; i++)
		if (rename(st->tmp[i], st->final[i]) != 0) {
			rc = -errno;
			cli_err(cmd, rc, "%s: cannot write it: %s", st->final[i], strerror(-rc));
		}
	for (; i < st->n; i++)
		remove_tmp(st->tmp[i]);
	stage_free(st);
	return rc;
}

