/* SQLite backend: searches (the Search records of POST /search, kept for
 * GET /search/{id} until they expire; docs/search.md). */
#include <string.h>

#include "core/limits.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_search[] =
    "CREATE TABLE searches (id TEXT PRIMARY KEY, org_id TEXT NOT NULL,"
    " created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, record TEXT NOT NULL);"
    "CREATE INDEX searches_expiry ON searches (expires_at);";

int sq_search_put(struct store *st_, const char *id, const char *org_id, int64_t created_at,
                  int64_t expires_at, const char *json)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "INSERT INTO searches (id, org_id, created_at, expires_at, record)"
                   " VALUES (?, ?, ?, ?, ?)",
                   "ssiis", id, org_id, created_at, expires_at, json);
    if (sqx_qrc(rc) == 0)
        rc = sqx_q(c, NULL,
                   "DELETE FROM searches WHERE org_id = ? AND id NOT IN (SELECT id FROM searches"
                   " WHERE org_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?)",
                   "ssi", org_id, org_id, (int64_t)LIM_SEARCH_STORED_PER_ORG);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

int sq_search_get(struct store *st_, const char *org_id, const char *id, int64_t now, char **json)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    *json = NULL;
    int rc =
        sqx_q(c, &st, "SELECT record FROM searches WHERE id = ? AND org_id = ? AND expires_at > ?",
              "ssi", id, org_id, now);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        *json = xstrdup(t ? (const char *)t : "");
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_search_prune(struct store *st_, int64_t now)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL, "DELETE FROM searches WHERE expires_at <= ?", "i", now);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}
