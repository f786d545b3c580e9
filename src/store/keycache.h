/*
 * keycache: the rows of an authenticated request (an API key and its org)
 * kept in memory, so that the hot path of every request does not read the
 * database. Backend-neutral: the backend owns the change signal and passes it
 * in as an epoch (the SQLite backend derives it from PRAGMA data_version on a
 * connection that never writes; PostgreSQL would use LISTEN/NOTIFY).
 *
 * Exactness rests on one rule the caller keeps: read the epoch BEFORE reading
 * the rows it stores, and bump the epoch whenever any commit to the database
 * (from any connection, any process) has been seen since the last reading. An
 * entry is only returned under the epoch it was stored with; once a newer
 * epoch has been seen, every older entry is dead. A commit that lands between the
 * epoch reading and the row read makes the entry merely short-lived, never
 * stale: the next epoch reading sees the commit.
 *
 * Bounded (a fixed number of direct-mapped slots, chosen by the key's hash;
 * a colliding key evicts; a slot's memory, about 1 KiB, is taken when it is
 * first used), thread-safe (one mutex, held for a copy).
 */
#ifndef BD_STORE_KEYCACHE_H
#define BD_STORE_KEYCACHE_H

#include <stdint.h>

#include "store/store.h"

#define KEYCACHE_SLOTS 1024

struct keycache;

/* An empty cache of KEYCACHE_SLOTS slots. */
struct keycache *keycache_new(void);
/* Frees every entry; accepts NULL. */
void keycache_free(struct keycache *kc);

/* Copies the rows stored for hash (hex SHA-256 of the key) under epoch into
 * key and org (org->overrides becomes an owned copy) and returns 1; returns
 * 0 on a miss, leaving key and org untouched. An epoch newer than the
 * cache's kills every entry stored before. */
int keycache_get(struct keycache *kc, uint64_t epoch, const char *hash, struct apikey_rec *key,
                 struct org_rec *org);
/* Stores copies of key and org for hash, read after the epoch was taken;
 * ignored when the cache has moved to a newer epoch meanwhile. */
void keycache_put(struct keycache *kc, uint64_t epoch, const char *hash,
                  const struct apikey_rec *key, const struct org_rec *org);

#endif
