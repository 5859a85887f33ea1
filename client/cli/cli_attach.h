/*
 * cli_attach.h — the tensors a step's attachment keeps exact (a -inf
 * mask, an int buffer, an optimizer's step count: what the Python binding
 * does not compress), moved into files by `ckpt restore` and back by
 * `ckpt save` (cli_attach.c). Internal to the CLI.
 */
#ifndef CLI_ATTACH_H
#define CLI_ATTACH_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"

/* A tensor the attachment kept exact: t names it as the files do (a flat
 * state's key; a nested state's path; an optimizer's @optimizer/...), its
 * data points into the attachment; optim: it belongs in the optimizer's
 * file. */
typedef struct cli_exact {
	char *name;
	rckpt_tensor_t t;
	int optim;
} cli_exact_t;

/* Whether split takes the tensor called name. */
typedef int (*cli_want_fn)(void *arg, const char *name);

/* Takes out of attachment att the tensors of the model and the
 * optimizer that a file can hold (every dtype but complex) and want()
 * wants (want NULL: all): *x, *nx, and the attachment without them in
 * *out (each replaced by {"__ref__": NAME, "__exact__": true}; the
 * trainer's extra state and every other blob left whole). *nx 0 and *out
 * NULL when none was taken, or att is not the binding's, or its JSON
 * cannot be read here (*unread 1: an integer past 64 bits, malformed).
 * 0, -EBADMSG (a malformed document: *out NULL), -ENOMEM. */
int cli_attach_split(const uint8_t *att, size_t len, cli_want_fn want, void *warg, cli_exact_t **x, unsigned *nx,
		     uint8_t **out, size_t *outlen, int *unread);
void cli_exact_free(cli_exact_t *x, unsigned n);

/* The tensor called name in the files beside a state, or NULL. */
typedef const rckpt_tensor_t *(*cli_find_fn)(void *arg, const char *name);

/* The reverse, for `ckpt save`: each exact reference of state put back as
 * the tensor find() gives (its bytes inline again): the attachment in
 * *out, the names of the tensors put back in names[0..n) (a save leaves
 * them out of what it compresses; cli_names_free). *out NULL, *n 0 when
 * there was none (msg says so when the state's JSON cannot be read).
 * -ENOENT, msg naming it, when no file holds one; -EBADMSG, msg saying
 * so, for a malformed state; -ENOMEM. */
int cli_attach_join(const uint8_t *state, size_t len, cli_find_fn find, void *arg, uint8_t **out,
		    size_t *outlen, char ***names, unsigned *n, char *msg, size_t msglen);
void cli_names_free(char **names, unsigned n);

#endif /* CLI_ATTACH_H */
