/* SQLite backend: the config registry (per organization: its analyses and
 * one entry per registrable domain; docs/config-registry.md). */
#include <string.h>

#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_cfgreg[] =
    "CREATE TABLE cfgreg_analyses (id TEXT PRIMARY KEY, org_id TEXT NOT NULL,"
    " domain TEXT NOT NULL, created_at INTEGER NOT NULL, record TEXT NOT NULL);"
    "CREATE INDEX cfgreg_analyses_org ON cfgreg_analyses (org_id, created_at);"
    "CREATE TABLE cfgreg_entries (org_id TEXT NOT NULL, domain TEXT NOT NULL,"
    " analysis_status TEXT NOT NULL, recommended_config TEXT NOT NULL,"
    " last_requested_at INTEGER NOT NULL, success_permille INTEGER NOT NULL,"
    " record TEXT NOT NULL, PRIMARY KEY (org_id, domain));";
/* The node running an entry's analysis (always "" here: one server). */
const char sq_schema_cfgreg_node[] =
    "ALTER TABLE cfgreg_entries ADD COLUMN node_id TEXT NOT NULL DEFAULT '';";

int sq_cfgreg_analysis_put(struct store *st_, const char *org_id, const char *id,
                           const char *domain, int64_t created_at, const char *json)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "INSERT INTO cfgreg_analyses (id, org_id, domain, created_at, record)"
                   " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO UPDATE SET record = ?5"
                   " WHERE org_id = ?2",
                   "sssis", id, org_id, domain, created_at, json);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

static int get_text(struct store *st_, const char *sql, const char *a, const char *b, char **json)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    *json = NULL;
    int rc = sqx_q(c, &st, sql, "ss", a, b);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        *json = xstrdup(t ? (const char *)t : "{}");
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_cfgreg_analysis_get(struct store *st_, const char *org_id, const char *id, char **json)
{
    return get_text(st_, "SELECT record FROM cfgreg_analyses WHERE org_id = ? AND id = ?", org_id,
                    id, json);
}

static void text_row(sqlite3_stmt *st, struct cfgreg_text *r)
{
    const unsigned char *t = sqlite3_column_text(st, 0);
    r->json = xstrdup(t ? (const char *)t : "{}");
}

int sq_cfgreg_analysis_list(struct store *st_, const char *org_id, const char *search,
                            struct page *pg, struct cfgreg_text **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT record FROM cfgreg_analyses WHERE org_id = ?1"
                   " AND (?2 IS NULL OR instr(domain, ?2) > 0)"
                   " ORDER BY created_at DESC, id LIMIT ?3 OFFSET ?4",
                   "ssii", org_id, search, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct cfgreg_text, text_row);
    if (rc)
        sqx_fail(c->db, "cfgreg_analysis_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_cfgreg_entry_put(struct store *st_, const struct cfgreg_entry_rec *r)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "INSERT INTO cfgreg_entries (org_id, domain, analysis_status,"
                   " recommended_config, last_requested_at, success_permille, record, node_id)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (org_id, domain) DO"
                   " UPDATE SET analysis_status = ?3, recommended_config = ?4,"
                   " last_requested_at = ?5, success_permille = ?6, record = ?7, node_id = ?8",
                   "ssssiiss", r->org_id, r->domain, r->analysis_status, r->recommended_config,
                   r->last_requested_at, (int64_t)r->success_permille, r->json,
                   r->node_id ? r->node_id : "");
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

int sq_cfgreg_entry_get(struct store *st_, const char *org_id, const char *domain, char **json)
{
    return get_text(st_, "SELECT record FROM cfgreg_entries WHERE org_id = ? AND domain = ?",
                    org_id, domain, json);
}

/* One statement per order (the statement cache is keyed by the SQL's address). */
#define ENTRY_LIST(order)                                                                          \
    "SELECT record FROM cfgreg_entries WHERE org_id = ?1 AND (?2 IS NULL OR instr(domain, ?2) > "  \
    "0)"                                                                                           \
    " ORDER BY " order ", domain LIMIT ?3 OFFSET ?4"
static const char *const entry_lists[5][2] = {
    {ENTRY_LIST("domain ASC"), ENTRY_LIST("domain DESC")},
    {ENTRY_LIST("analysis_status ASC"), ENTRY_LIST("analysis_status DESC")},
    {ENTRY_LIST("recommended_config ASC"), ENTRY_LIST("recommended_config DESC")},
    {ENTRY_LIST("last_requested_at ASC"), ENTRY_LIST("last_requested_at DESC")},
    {ENTRY_LIST("success_permille ASC"), ENTRY_LIST("success_permille DESC")},
};

int sq_cfgreg_entry_list(struct store *st_, const char *org_id, const char *search,
                         enum cfgreg_sort sort, int descending, struct page *pg,
                         struct cfgreg_text **rows, size_t *n)
{
    const char *sql = entry_lists[(unsigned)sort < 5 ? sort : 0][descending ? 1 : 0];
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc =
        sqx_q(c, &st, sql, "ssii", org_id, search, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct cfgreg_text, text_row);
    if (rc)
        sqx_fail(c->db, "cfgreg_entry_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_cfgreg_prune(struct store *st_, const char *org_id, size_t keep_analyses,
                    size_t keep_entries)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "DELETE FROM cfgreg_analyses WHERE org_id = ?1 AND id NOT IN (SELECT id FROM"
                   " cfgreg_analyses WHERE org_id = ?1 ORDER BY created_at DESC, id LIMIT ?2)",
                   "si", org_id, (int64_t)keep_analyses);
    if (rc >= 0)
        rc = sqx_q(c, NULL,
                   "DELETE FROM cfgreg_entries WHERE org_id = ?1 AND domain NOT IN (SELECT domain"
                   " FROM cfgreg_entries WHERE org_id = ?1 ORDER BY last_requested_at DESC, domain"
                   " LIMIT ?2)",
                   "si", org_id, (int64_t)keep_entries);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

static void running_row(sqlite3_stmt *st, struct cfgreg_text *r)
{
    sqx_col(st, 0, r->org_id, sizeof r->org_id);
    const unsigned char *t = sqlite3_column_text(st, 1);
    r->json = xstrdup(t ? (const char *)t : "{}");
}

int sq_cfgreg_running(struct store *st_, const char *node_id, struct page *pg,
                      struct cfgreg_text **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT org_id, record FROM cfgreg_entries WHERE analysis_status = 'running'"
                   " AND (?1 IS NULL OR node_id = ?1) ORDER BY org_id, domain LIMIT ?2 OFFSET ?3",
                   "sii", node_id, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct cfgreg_text, running_row);
    if (rc)
        sqx_fail(c->db, "cfgreg_running");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_cfgreg_entry_settle(struct store *st_, const char *org_id, const char *domain,
                           const char *status, const char *json, const char *was)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "UPDATE cfgreg_entries SET analysis_status = ?, record = ? WHERE org_id = ?"
                   " AND domain = ? AND analysis_status = ?",
                   "sssss", status, json, org_id, domain, was);
    rc = sqx_touched(c, rc);
    sqx_conn_put(s, c);
    return rc;
}
