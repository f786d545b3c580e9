/*
 * procreq: the rules of a process call's request (SESSION_API.md section 3),
 * as pure functions: what exec and spawn accept (ProcessExecParams /
 * ProcessSpawnParams), who a process may run as, process ids, signals,
 * PTY sizes and stdin's base64. No I/O; the handlers (api/process.c) and a
 * table test (tests/unit/test_procreq.c) call them.
 */
#ifndef BD_DOMAIN_PROCREQ_H
#define BD_DOMAIN_PROCREQ_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"
#include "core/strvec.h"

/* A validated exec or spawn body. Strings in argv and env are owned. */
struct procreq {
    struct strvec argv; /* command, then args */
    struct strvec env;  /* "K=V" from env */
    const char *cwd;    /* borrowed from the body; NULL: the default */
    int as_root;
    int tty, rows, cols; /* spawn only; rows/cols 0 when not given */
    long long timeout_s; /* 0: not given */
};

/* Largest timeout_sec of exec (limits.h) and of spawn (a week: spawned
 * processes are meant to live). */
#define PROCREQ_SPAWN_TIMEOUT_MAX_S (7LL * 24 * 3600)
#define PROCREQ_DIM_MAX             65535

/* Validates body (an object) for exec (spawn 0) or spawn (1). uid is the
 * session's user id (as_user may name it). Fails with E_INVALID, the field
 * and the rule in e; *r is then cleared. command is executed directly, so
 * it, args and env hold no NUL bytes; env names are non-empty without '='. */
int procreq_parse(const json_t *body, int spawn, unsigned uid, struct procreq *r,
                  struct err *e) WUR;
void procreq_clear(struct procreq *r);

/* 1 when as_user names the session's user: "kernel" or its uid, with an
 * optional ":gid" that is the session's group (the uid again). */
int procreq_user_ok(const char *as_user, unsigned uid);
/* 1 for a UUID in its 36-character text form (any version, any case). */
int procreq_is_uuid(const char *s);
/* The signal of a kill body's name (TERM, KILL, INT, HUP), 0 for others. */
int procreq_signal(const char *name);
/* A resize body: rows and cols integers in 1..65535 (kernel-images'
 * messages). */
int procreq_resize(const json_t *body, int *rows, int *cols, struct err *e) WUR;
/* Strict standard base64 (padding required, no whitespace) of n bytes into
 * *out (owned, xfree; NUL-terminated, not counted). -1 when malformed. */
int procreq_b64_decode(const char *in, size_t n, unsigned char **out, size_t *outlen) WUR;

#endif
