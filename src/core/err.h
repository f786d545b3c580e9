/*
 * err: how every fallible function reports failure.
 *
 * Functions return 0 or one of the negative codes below; when they fail they
 * also fill a caller-provided struct err with the Error record the client will
 * see (code, message, details). The HTTP layer maps the return code to a status
 * in exactly one table (http/response.c); nothing else knows about statuses.
 *
 * A struct err is plain data (no heap), so it can live on the stack and be
 * discarded without cleanup.
 */
#ifndef BD_CORE_ERR_H
#define BD_CORE_ERR_H

#include <errno.h>
#include <stddef.h>

#define WUR __attribute__((warn_unused_result))

/* Return codes (negative errno values, libuv style) and the status each becomes. */
#define E_INVALID   (-EINVAL)       /* 400 bad_request */
#define E_UNAUTH    (-EKEYREJECTED) /* 401 unauthorized */
#define E_FORBIDDEN (-EACCES)       /* 403 forbidden */
#define E_NOTFOUND  (-ENOENT)       /* 404 not_found */
#define E_METHOD    (-EOPNOTSUPP)   /* 405 method_not_allowed */
#define E_CONFLICT  (-EEXIST)       /* 409 conflict */
#define E_TOOBIG    (-E2BIG)        /* 413 payload_too_large */
#define E_LIMIT     (-EAGAIN)       /* 429 rate_limited */
#define E_INTERNAL  (-EIO)          /* 500 internal */
#define E_NOTIMPL   (-ENOSYS)       /* 501 not_implemented */
#define E_UNAVAIL   (-EBUSY)        /* 503 unavailable */
#define E_UPSTREAM  (-EPROTO)       /* 502 bad_gateway: a site or store the server reached failed */

#define ERR_CODE_MAX 48
#define ERR_MSG_MAX  512

struct err_detail {
    char code[ERR_CODE_MAX];
    char message[ERR_MSG_MAX];
};

struct err {
    int rc;                    /* 0 while no error has been recorded */
    char code[ERR_CODE_MAX];   /* Error.code */
    char message[ERR_MSG_MAX]; /* Error.message */
    struct err_detail details[32];
    size_t ndetails; /* entries used in details */
    size_t nmore;    /* problems beyond the details array */
    int retry_after; /* seconds, for E_LIMIT; 0 = none */
};

/* Resets e to "no error". */
void err_init(struct err *e);

/* Records a failure: rc (one of E_*), Error.code and a printf-style message.
 * Replaces any earlier code and message but keeps details. Returns rc so that
 * callers can write `return err_set(e, E_NOTFOUND, "not_found", "...")`. */
int err_set(struct err *e, int rc, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records one invalid field: adds a detail {code: "invalid_input",
 * message: "<path>: <rule>"} and makes e a 400 bad_request whose message is the
 * first problem (or "N problems in the request" when there are several).
 * path is the field path as the client wrote it ("viewport.width",
 * "tags.team", "network.private_hosts[3]"); "" means the body itself.
 * Returns E_INVALID. */
int err_field(struct err *e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when at least one field error has been recorded. */
int err_has_fields(const struct err *e);

/* Adds an inner detail with its own code, without changing rc. */
void err_detail(struct err *e, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Names a host folder (the data folder) that no client may read in an Error
 * record: err_scrub writes `as` in its place. Called at start, before any
 * thread; at most ERR_HIDDEN_MAX folders, the rest ignored. Borrowed. */
#define ERR_HIDDEN_MAX 4
void err_hide_path(const char *path, const char *as);
/* Replaces every hidden folder in text (cap bytes, at most ERR_MSG_MAX
 * used), cutting what no longer fits: the HTTP layer does it to every Error
 * record it answers (the server's log keeps the full text). */
void err_scrub_text(char *text, size_t cap);

#endif
