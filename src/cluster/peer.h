/*
 * peer: small blocking requests from one node to another (what a node must
 * read from the node that runs a pool, to list it with its live counts, and
 * a flush it asks of a pool's home node).
 * The exchange is proxy/httpc's: the answer is untrusted bytes, parsed by
 * core/httpresp.
 */
#ifndef BD_CLUSTER_PEER_H
#define BD_CLUSTER_PEER_H

#include <jansson.h>

#include "core/err.h"

/* Largest body a peer call reads. */
#define PEER_BODY_MAX (1u << 20)

/* GETs path from the node at base ("http://host:port"), with the given
 * extra header lines (NULL-terminated "Name: value" strings; each without
 * CR or LF) and "X-Browserd-Hop: 1", within timeout_ms for the whole
 * exchange. On 0, *status is the answer's status and *out its body parsed
 * as JSON (NULL when it is not JSON). E_UNAVAIL when the node cannot be
 * reached or answers malformed bytes. */
int peer_get_json(const char *base, const char *path, const char *const *headers, int timeout_ms,
                  int *status, json_t **out, struct err *e) WUR;
/* The same with another method and an empty body ("Content-Length: 0"
 * unless method is GET): a node asking another to act on what it runs (a
 * pool's home flushing it, api/pools.c). */
int peer_call_json(const char *base, const char *method, const char *path,
                   const char *const *headers, int timeout_ms, int *status, json_t **out,
                   struct err *e) WUR;

#endif
