/*
 * mcpreg: the MCP sessions of the /mcp endpoint (api/mcp.c, docs/mcp.md).
 * An MCP session is an id issued at `initialize`, the organization and
 * project (of the API key) that opened it, the browser session its tools act on (created on first
 * tool use; "" until then) and the page target they act on ("" = the first page).
 *
 * What it owns: one process-wide table of at most LIM_MCP_SESSIONS
 * entries, copied in and out (no pointer into it escapes), under its own
 * lock. One organization holds at most LIM_MCP_SESSIONS_PER_ORG of them.
 *
 * Threading: every function is thread-safe. Calls on one MCP session run
 * one at a time: mcpreg_acquire waits (bounded) while another holds it, and
 * the holder gives it back with mcpreg_release.
 *
 * Ids are random (CRYPTO_ID_LEN characters); an entry is found only with
 * the organization and project that opened it, so another organization's
 * key, or another project's, sees E_NOTFOUND, as for an id that never
 * existed (a project's browsers are not another project's).
 */
#ifndef BD_RUNTIME_MCPREG_H
#define BD_RUNTIME_MCPREG_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define MCPREG_ID_MAX 64

struct mcpreg_entry {
    char id[MCPREG_ID_MAX];
    char org[MCPREG_ID_MAX];
    char project[MCPREG_ID_MAX];    /* "" for an org-wide key */
    char session_id[MCPREG_ID_MAX]; /* the browser session; "" before the first tool call */
    char target[MCPREG_ID_MAX];     /* the selected page target; "" = the first page */
    int64_t last_used_ms;           /* monotonic */
};

/* Opens an MCP session for org and project: its id into id (MCPREG_ID_MAX bytes). E_LIMIT
 * (429, retry_after set) when org already holds LIM_MCP_SESSIONS_PER_ORG,
 * the table is full, or org's MCP sessions that have no browser yet would
 * pass room (the browsers the organization may still start; negative: no
 * bound): an MCP session counts against the org's sessions from its start. */
int mcpreg_open(const char *org, const char *project, long long room, char *id, struct err *e) WUR;

/* Takes the MCP session id of org and project for one call, waiting up to
 * LIM_MCP_BUSY_WAIT_MS for a call that holds it, and copies it into *out.
 * E_NOTFOUND when there is none (ended, or another organization's), E_LIMIT
 * (session_busy) when the wait ran out. */
int mcpreg_acquire(const char *org, const char *project, const char *id, struct mcpreg_entry *out,
                   struct err *e) WUR;

/* Gives back what mcpreg_acquire took, storing in->session_id and
 * in->target, and marks it used now. A no-op when the entry is gone. */
void mcpreg_release(const struct mcpreg_entry *in);

/* Ends the MCP session id of org and project (waiting as mcpreg_acquire for a call that
 * holds it) and copies it into *out (its browser session is the caller's
 * to end). E_NOTFOUND or E_LIMIT as mcpreg_acquire. */
int mcpreg_close(const char *org, const char *project, const char *id, struct mcpreg_entry *out,
                 struct err *e) WUR;

/* Removes up to cap MCP sessions not used for idle_ms (monotonic now_ms)
 * and not held by a call, copying them into out (their browsers are the
 * caller's to end); returns how many. */
size_t mcpreg_expire(int64_t now_ms, int64_t idle_ms, struct mcpreg_entry *out, size_t cap);

/* Marks the MCP session id of org and project used now: 0, or E_NOTFOUND. */
int mcpreg_touch(const char *org, const char *project, const char *id) WUR;

/* MCP sessions org holds. */
size_t mcpreg_count(const char *org);

#endif
