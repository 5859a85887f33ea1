/*
 * rckpt.h — the public interface of librckpt, the client library of rckpt:
 * compressed deep-learning checkpoints and training data on Ceph.
 *
 * Conventions (every function):
 *  - Functions return 0 (or a byte count where stated) on success and a
 *    negative error code on failure: a negative errno, the same values a cls
 *    method returns through the OSD, or one of the RCKPT_E* codes below.
 *    rckpt_strerror() names any of them.
 *  - A handle records a message for its last failure: which function failed
 *    and why (rckpt_errmsg). Messages are for people; codes are for programs.
 *  - A handle is used by one thread at a time. Different handles are
 *    independent. The library keeps no global state.
 *  - Destroy functions accept NULL.
 *
 * Since v0.1.
 */
#ifndef RCKPT_H
#define RCKPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RCKPT_BUILDING_LIBRARY) && defined(__GNUC__)
#define RCKPT_API __attribute__((visibility("default")))
#else
#define RCKPT_API
#endif

#define RCKPT_VERSION_MAJOR 0
#define RCKPT_VERSION_MINOR 1
#define RCKPT_VERSION_PATCH 0
/* The ABI: librckpt.so.RCKPT_ABI_VERSION. Raised with any change that
 * breaks a program built against the previous one (a function removed or
 * changed, a structure's layout changed other than by a versioned options
 * structure growing at its end). */
#define RCKPT_ABI_VERSION 0
#define RCKPT_VERSION_NUMBER \
	(RCKPT_VERSION_MAJOR * 10000 + RCKPT_VERSION_MINOR * 100 + RCKPT_VERSION_PATCH)

/* Options structures (rckpt_connect_opts_t, rckpt_job_opts_t, ...) begin
 * with a version, RCKPT_*_OPTS_VERSION, and have an _INIT macro that sets
 * it and every default: start from it, then set what you need. Before the
 * first tagged release (1.0) each is at version 1 and may still change
 * (fields added, moved or renamed, its version staying 1); a library
 * refuses (-EINVAL) any version but its own. The 1.0 release freezes the
 * public API and ABI: from then on an options structure only grows at its
 * end, with a new version, and the library keeps taking the older ones. */

/* The version of the library actually linked, as RCKPT_VERSION_NUMBER. */
RCKPT_API unsigned rckpt_version_number(void);
/* "0.1.0", and what the build includes, e.g. "0.1.0 (cuda)". Static string. */
RCKPT_API const char *rckpt_version_string(void);

/* ---- errors ---- */

/* Library codes, in a band no errno uses. Values are pinned. */
#define RCKPT_EVERSION (-4201)  /* format or protocol version this code cannot read */
#define RCKPT_ECHECKSUM (-4202) /* stored data failed its checksum */

/* A static, human-readable name of err: a negative errno, an RCKPT_E* code,
 * or 0. Never NULL. */
RCKPT_API const char *rckpt_strerror(int err);

/* ---- connection ---- */

typedef struct rckpt rckpt_t;

#define RCKPT_CONNECT_OPTS_VERSION 1

/* Which copy of a replicated pool serves the handle's reads (checkpoint
 * restores, PCR records, indexes). Ceph serves a read from a replica only
 * where that replica has every acknowledged write of the object, else it
 * sends it on to the primary: what is read is the same either way. */
#define RCKPT_READ_BALANCE 0  /* any replica, at random (the default): reads spread over the OSDs */
#define RCKPT_READ_PRIMARY 1  /* the primary only, as librados does by default */
#define RCKPT_READ_LOCALIZE 2 /* the replica nearest the client's crush_location */

/* Options of rckpt_connect. Initialise with RCKPT_CONNECT_OPTS_INIT (every
 * options structure has its _INIT; see "Options structures" above). */
typedef struct rckpt_connect_opts {
	unsigned version;      /* RCKPT_CONNECT_OPTS_VERSION */
	const char *conf_path; /* ceph.conf; NULL: $CEPH_CONF, then Ceph's default search */
	const char *user;      /* cephx user, "admin" or "client.admin"; NULL: "admin" */
	const char *pool;      /* NULL: "rckpt" */
	unsigned timeout_s;    /* monitor and OSD operation timeout; 0: 30 s */
	unsigned read_from;    /* RCKPT_READ_* */
} rckpt_connect_opts_t;

#define RCKPT_CONNECT_OPTS_INIT { RCKPT_CONNECT_OPTS_VERSION, NULL, NULL, NULL, 0, RCKPT_READ_BALANCE }

/* Allocates an unconnected handle. Returns 0 or -ENOMEM. */
RCKPT_API int rckpt_create(rckpt_t **out);

/* Connects h to the cluster and opens the pool. Errors include -EINVAL (bad
 * options, or h already connected), -ENOENT (no such config file or pool),
 * -EACCES/-EPERM (cephx refused), -ETIMEDOUT (no monitor answered within the
 * timeout). On failure h stays unconnected and rckpt_errmsg(h) says why.
 * A program that can be paused for long (SIGSTOP, a frozen VM) should
 * ignore SIGPIPE, as Python and the rckpt tool do: librados may write to a
 * connection its peer closed meanwhile, and the library leaves the
 * process's signal dispositions alone. */
RCKPT_API int rckpt_connect(rckpt_t *h, const rckpt_connect_opts_t *opts);

/* Points an unconnected h at a dump that `rados export` wrote (of the
 * pool, all namespaces: `rados -p POOL --all export FILE`) instead of a
 * cluster: its jobs can be listed and restored, folded here, with no
 * cluster at all; nothing can be written (-EROFS). rckpt_pool_name(h) is
 * then the file's path. -EINVAL (connected already), -ENOENT and other
 * errors of opening the file, -EBADMSG (not such a dump), -ENOMEM. */
RCKPT_API int rckpt_open_dump(rckpt_t *h, const char *path);

/* Disconnects and frees h. Accepts NULL. Call it before the process exits
 * (returning from main included): a connected handle keeps librados'
 * threads running into the process's teardown, where they crash it
 * (SIGSEGV or abort in its timer or messenger threads, a few exits in a
 * hundred). Free every job, reader and loader made from h first. */
RCKPT_API void rckpt_destroy(rckpt_t *h);

/* The message of h's last failure, or "" when none. Valid until the next
 * call on h. Accepts NULL (returns ""). */
RCKPT_API const char *rckpt_errmsg(const rckpt_t *h);

/* Copies the cluster's fsid (36 characters and a NUL) into out[0..cap).
 * Returns 0, -ENOTCONN, or -ERANGE when cap < 37. */
RCKPT_API int rckpt_cluster_fsid(rckpt_t *h, char *out, size_t cap);

/* The pool h opened, or NULL when not connected. */
RCKPT_API const char *rckpt_pool_name(const rckpt_t *h);

/* ---- plugins (object classes running in the OSDs) ---- */

#define RCKPT_PLUGIN_NAME_MAX 32
#define RCKPT_PLUGIN_FORMATS_MAX 16

typedef struct rckpt_plugin_info {
	char name[RCKPT_PLUGIN_NAME_MAX + 1]; /* as the plugin names itself */
	unsigned major, minor, patch;         /* the plugin's rckpt version */
	char built_for[65];                   /* the Ceph release it was built against */
	unsigned nformats;
	struct {
		char name[RCKPT_PLUGIN_NAME_MAX + 1];
		unsigned min_version, max_version;
	} formats[RCKPT_PLUGIN_FORMATS_MAX]; /* the formats it understands */
} rckpt_plugin_info_t;

/* Asks the OSD serving the pool for the `version` of object class `plugin`
 * ("rckpt" or "pcr"). Returns 0; -EOPNOTSUPP when the OSD has no such class
 * or method (plugin not installed); -EPERM when the class is not in the OSD's
 * `osd class load list` or the user's caps lack `x`; -EBADMSG or
 * RCKPT_EVERSION when the answer cannot be read. */
RCKPT_API int rckpt_plugin_version(rckpt_t *h, rckpt_plugin_info_t *out, const char *plugin);

/* What one OSD answered (rckpt_plugin_versions). */
typedef struct rckpt_osd_plugin {
	int osd;                  /* the OSD's id */
	int rc;                   /* 0, or why it gave no answer: as rckpt_plugin_version's; -ENOENT
				     when it serves no placement group of the pool; -ENODATA when
				     there is no object to ask it on: its probe object is missing,
				     this user may not make it, and it serves no other object of
				     the pool (of the namespace, for rckpt_plugin_versions_in) */
	rckpt_plugin_info_t info; /* when rc is 0 */
} rckpt_osd_plugin_t;

/* Asks every OSD that is up for plugin's version, each on an object of the
 * pool it serves: rckpt.probe.K, the first names that map to it, made
 * empty where missing; where this user may not make it (a reader), any
 * other object of the pool that OSD serves (the OSD runs a class method
 * only on an object that exists). out[0..*n): one per OSD, by id (at most
 * cap). Returns 0, or an error of asking the monitors (-ERANGE: more than
 * cap OSDs); -EOPNOTSUPP without OSDs (a dump). Per-OSD failures are in
 * out[i].rc, not the return. Needs no write right. */
RCKPT_API int rckpt_plugin_versions(rckpt_t *h, const char *plugin, rckpt_osd_plugin_t *out, unsigned cap,
				    unsigned *n);

/* The same, on the objects of namespace ns only (a job's name, or
 * "pcr/" and a dataset's): for a user whose caps are limited to it. Makes
 * nothing. -EPERM when this user may not list ns. */
RCKPT_API int rckpt_plugin_versions_in(rckpt_t *h, const char *ns, const char *plugin,
				       rckpt_osd_plugin_t *out, unsigned cap, unsigned *n);

/* What a failed class call's code means (the rc of rckpt_osd_plugin_t, or
 * of rckpt_plugin_call): a static string. */
RCKPT_API const char *rckpt_plugin_strerror(int rc);

/* Calls method `method` of object class `cls` on object `oid` of the pool:
 * a diagnostic for operators. Returns the number of reply bytes (at most
 * out_cap, copied to out) or a negative code as rckpt_plugin_version, and
 * -ERANGE when the reply does not fit. */
RCKPT_API int rckpt_plugin_call(rckpt_t *h, void *out, size_t out_cap, const char *oid,
				const char *cls, const char *method, const void *in, size_t in_len);

/* Training data (PCR datasets, the loader and its transports) and
 * checkpoints (jobs, saves, restores, the policy, group saves over a
 * loader's transport): */
#include "rckpt_data.h"
#include "rckpt_ckpt.h"

/* ---- build and machine ---- */

typedef struct rckpt_gpu_info {
	int built_with_cuda;   /* this build compiled the CUDA code */
	int runtime_version;   /* CUDA runtime, 1000*major + 10*minor; 0 if none */
	int driver_version;    /* CUDA driver found, same encoding; 0 if none */
	int device_count;      /* 0 when no driver or no device */
	char device_name[128]; /* device 0 */
} rckpt_gpu_info_t;

/* What GPU support this build has and this machine offers. Returns 0. */
RCKPT_API int rckpt_gpu_info(rckpt_gpu_info_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RCKPT_H */
