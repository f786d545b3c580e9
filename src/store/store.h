/*
 * store: persistence behind one const ops table (redis ConnectionType habit),
 * so that a PostgreSQL backend can follow without touching callers. Callers use
 * the store_* wrappers; backends fill struct store_ops.
 *
 * Records are plain structs with fixed-size text fields; a JSON document field
 * (overrides, entitlements) is an owned heap string released by the *_clear
 * function of its record. Every function may be called from any thread.
 *
 * Return codes: 0, E_NOTFOUND (no such row), E_CONFLICT (unique name taken,
 * or a rule such as "last project" refused), E_INTERNAL (the backend failed;
 * logged with detail). `e` may be NULL where the caller has no use for text.
 */
#ifndef BD_STORE_STORE_H
#define BD_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define STORE_ID    25
#define STORE_NAME  256
#define STORE_SHORT 64

struct org_rec {
    char id[STORE_ID];
    char name[STORE_NAME];
    char plan[STORE_SHORT];
    char plan_status[STORE_SHORT];
    char trial_plan[STORE_SHORT]; /* "" = none */
    int64_t trial_ends_at;        /* ms since epoch; 0 = none */
    int projects_enabled;
    char *overrides; /* owned JSON object text, never NULL after a get */
    char default_project_id[STORE_ID];
    int64_t created_at;
};

struct project_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char name[STORE_NAME];
    char status[16]; /* active | archived */
    int64_t created_at, updated_at;
};

/* Concurrency limits an organization sets (the service's /org/limits and
 * /org/projects/{id}/limits): a project's row, or with project_id "" the
 * organization's, whose max_sessions is the default of projects without
 * their own. 0 = no cap. */
struct limits_rec {
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    int64_t max_sessions;    /* max_concurrent_sessions (the project default on the org's row) */
    int64_t max_invocations; /* max_concurrent_invocations (projects only) */
};

struct apikey_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID]; /* "" = organization-scoped */
    char name[STORE_NAME];
    char key_hash[65];   /* hex SHA-256 of the plaintext key */
    char masked_key[32]; /* "bd_ab...wxyz" */
    int64_t created_at;
    int64_t expires_at; /* 0 = never */
    int64_t deleted_at; /* 0 = live */
};

/* A browser session. The record's settings live in `data`, a JSON object
 * (headless, stealth, timeout_seconds, region, memory, viewport, tags, proxy,
 * network, telemetry, chrome_policy, kiosk_mode, gpu, start_url, ...); the
 * columns are what queries filter on and what crash recovery needs. */
struct session_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char name[STORE_NAME]; /* "" = none */
    char status[16];       /* active | deleted */
    int64_t created_at;
    int64_t deleted_at;    /* 0 while active */
    int64_t uptime_ms;     /* final once usage_status is ready */
    char usage_status[16]; /* "" while active; pending | ready once deleted */
    char end_reason[128];
    int pid; /* browser process, 0 = none */
    unsigned long long pid_start;
    int xvfb_pid;
    unsigned long long xvfb_start;
    char node_id[STORE_ID]; /* the node running the browser ("local" on SQLite) */
    char *data;             /* owned JSON object text */
};

void session_rec_clear(struct session_rec *s);

/* A saved browser state (the archive itself lives in the data folder, see
 * api/profiles.h). Scoped to a project; the name is unique within it. */
struct profile_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char name[STORE_NAME]; /* "" = none */
    int64_t created_at;
    int64_t updated_at;
    int64_t last_used_at; /* 0 = never used by a session */
};

/* Filters of GET /profiles. */
struct profile_filter {
    const char *name;  /* exact name, NULL = any */
    const char *query; /* substring of name, NULL = any */
};

/* records: profiles */
/* A browser pool; `config` is its browser_pool_config JSON text (owned). */
struct pool_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char name[STORE_NAME]; /* "" = none */
    char status[16];       /* active | deleted */
    int64_t created_at;
    char node_id[STORE_ID]; /* the node whose engine fills and hands out the pool
                               ("local" on SQLite); written by pool_insert and
                               by the node ops, never by pool_update */
    char *config;
};

void pool_rec_clear(struct pool_rec *p);
/* records: pools */
/* A proxy of a project. Settings that need no query (protocol, bypass_hosts,
 * config, the sealed password) live in `data`, a JSON object. */
struct proxy_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char name[STORE_NAME]; /* "" = none */
    char type[16];         /* datacenter | isp | residential | mobile | custom */
    char status[16];       /* "" = never checked | available | unavailable */
    int64_t last_checked;  /* ms since epoch; 0 = never */
    int64_t created_at;
    char *data; /* owned JSON object text */
};

void proxy_rec_clear(struct proxy_rec *p);

/* records: proxies */
/* A persisted telemetry event (text is the event's JSON object, owned). */
struct telem_event_rec {
    int64_t seq;
    int64_t ts; /* ms since epoch */
    char category[16];
    char *text;
};
/* What a telemetry event list selects. */
struct telem_query {
    const char *categories[16]; /* empty = every category */
    size_t ncategories;
    int64_t since_ms, until_ms; /* inclusive bounds on ts; 0 = open */
    int64_t after_seq;          /* seq > after_seq */
    int desc;                   /* newest first */
};
/* An organization's OTLP destination. */
struct otlp_dest_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char name[STORE_NAME];
    char endpoint[2048];
    char *headers; /* owned JSON object text of string values */
    int64_t created_at, updated_at;
};
void telem_event_rec_clear(struct telem_event_rec *r);
void otlp_dest_rec_clear(struct otlp_dest_rec *d);
/* records: telemetry */
/* An audit log entry (telemetry/audit.h): one authenticated call that
 * changed something, or one failed authentication. The strings are owned. */
struct audit_rec {
    int64_t id;            /* assigned by the store on insert, increasing */
    char entry_id[33];     /* random hex given when the entry is made: a second insert of
                              the same entry (a spool replayed) is ignored */
    int64_t ts;            /* ms since epoch, when the call arrived */
    char org_id[STORE_ID]; /* "" = the operator's (no organization known) */
    char method[16];
    char auth_strategy[16]; /* api_key, session_token, admin_token */
    char service[32];       /* the route's first segment ("browsers", "profiles") */
    int status;
    int64_t duration_ms;
    char *path, *route, *client_ip, *user_agent, *user_id;
    char *domain; /* the request's Host */
};
void audit_rec_clear(struct audit_rec *r);
/* What an audit log list selects, within one organization. Lists are the
 * set ",A,B," ("" = any). The cursor (after_ts, after_id; after_id 0 =
 * none) is the last entry of the previous page. */
struct audit_query {
    int64_t start_ms, end_ms; /* start <= ts < end */
    const char *methods, *exclude_methods, *user_ids;
    const char *service, *auth_strategy; /* "" = any */
    const char *search; /* "" = any: a case-insensitive substring of the path, route,
                           user agent, client ip, user id or status; an entry of one of
                           user_ids matches too (OR) */
    int64_t after_ts, after_id;
    int asc; /* oldest first (exports); else newest first */
};
/* records: audit */
/* An uploaded browser extension (the zip lives in the data folder, see
 * api/extensions.h). Scoped to a project; the name is unique within it. */
struct ext_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char name[STORE_NAME]; /* "" = none */
    int64_t created_at;
    int64_t size_bytes;
    char checksum[65];    /* hex SHA-256 of the uploaded zip */
    int64_t last_used_at; /* 0 = never loaded into a browser */
};
/* records: extensions */
/* A credential of a project (api/credentials.h). The name is unique within
 * the project. `data` is a JSON object holding the sealed values
 * ({"values": {key: sealed}, "totp": sealed?, "sso_provider": s?}); nothing
 * in it is clear text but the keys and the SSO provider. */
struct cred_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char name[STORE_NAME];
    char domain[STORE_NAME];
    int64_t created_at;
    int64_t updated_at;
    char *data; /* owned JSON object text */
};

void cred_rec_clear(struct cred_rec *c);
/* records: credentials */
/* A vault (vault_id "") or an item of one (vault_id = the vault's id; name =
 * the item's key) of a project (api/vaults.h). Names are unique within the
 * vault (vaults: within the project). An item's `data` holds its sealed
 * values, as a credential's does; `version` counts its updates. */
struct vault_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char vault_id[STORE_ID];
    char name[STORE_NAME];
    char type[16]; /* "vault" | "credential" */
    int64_t version;
    int64_t created_at;
    int64_t updated_at;
    char *data; /* owned JSON object text */
};

void vault_rec_clear(struct vault_rec *v);
/* records: vaults */
/* A managed auth connection of a project (api/authconn.h): unique per
 * profile name and domain in the project. `data` holds its settings, the
 * state of its latest flow and its timeline; never a credential value. */
struct authconn_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char profile_name[STORE_NAME];
    char domain[STORE_NAME];
    int64_t created_at;
    int64_t updated_at;
    char *data; /* owned JSON object text */
};

void authconn_rec_clear(struct authconn_rec *c);
/* records: authconn */

/* A deployment (kind "deployment") or an invocation (kind "invocation") of
 * an app of a project (api/apps.h). The indexed columns repeat fields of
 * data, the record's JSON object text; bytes is a deployment's unpacked
 * size on disk (0 for an invocation). */
struct appobj_rec {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char kind[16];
    char app_name[STORE_NAME];
    char version[STORE_NAME];
    char status[16];
    int64_t bytes;
    int64_t created_at;
    int64_t updated_at;
    char *data; /* owned JSON object text */
};

void appobj_rec_clear(struct appobj_rec *r);

/* A server process of a cluster (shared store only). Times are the
 * database's clock, in ms since the epoch. */
struct node_rec {
    char id[STORE_ID]; /* new at every process start */
    char name[STORE_NAME];
    char advertise_url[512];
    char state[8]; /* up | dead */
    int64_t started_at, heartbeat_at;
    int64_t capacity, running;
};

/* Filters of GET /browsers. */
struct session_filter {
    const char *status; /* active | deleted | all */
    const char *query;  /* substring of name, NULL = any */
    const char *tag_keys[16];
    const char *tag_values[16];
    size_t ntags;
};

/* List filters of projects and API keys (every field optional). */
struct name_filter {
    const char *name;   /* exact, case-insensitive */
    const char *query;  /* case-insensitive substring */
    const char *status; /* keys: active (default) | deleted | all */
    int sort_by;        /* keys: 0 created_at, 1 name, 2 expires_at */
    int descending;
};

/* A page of a list: the rows plus whether more follow. */
struct page {
    size_t limit, offset;
    int has_more; /* out */
};

/* Config registry rows (docs/config-registry.md): a record's JSON text (owned). */
struct cfgreg_text {
    char *json;
    char org_id[STORE_ID]; /* filled by cfgreg_running only */
};
/* GET /config-registry's sort_by: target (the domain), analysis_status,
 * recommended_config, last_requested_at, success_rate. */
enum cfgreg_sort {
    CFGREG_SORT_TARGET,
    CFGREG_SORT_STATUS,
    CFGREG_SORT_CONFIG,
    CFGREG_SORT_REQUESTED,
    CFGREG_SORT_RATE
};
/* One registry entry (an organization's registrable domain), borrowed
 * strings: the sortable columns beside the record's JSON text. */
struct cfgreg_entry_rec {
    const char *org_id, *domain, *analysis_status, *recommended_config, *json;
    int64_t last_requested_at; /* ms since the epoch */
    int success_permille;      /* 0..1000; -1 none measured */
    const char *node_id;       /* the node running its analysis (NULL: "", one server) */
};

struct store;

struct store_ops {
    const char *name;
    void (*close)(struct store *st);

    int (*meta_get)(struct store *st, const char *key, char *val, size_t cap);
    /* Sets key to val unless it already has a value; *out receives the stored value. */
    int (*meta_init)(struct store *st, const char *key, const char *val, char *out, size_t cap);

    int (*org_count)(struct store *st, int64_t *n);
    /* Creates the org and its default project in one transaction; fills the ids and times. */
    int (*org_create)(struct store *st, struct org_rec *org, struct project_rec *proj);
    int (*org_get)(struct store *st, const char *id, struct org_rec *out);
    int (*org_update)(struct store *st, const struct org_rec *org);

    int (*plan_get)(struct store *st, const char *id, char **json);
    int (*plan_put)(struct store *st, const char *id, const char *json);
    /* Calls fn for every stored plan, in id order. */
    int (*plan_each)(struct store *st, void (*fn)(void *ctx, const char *id, const char *json),
                     void *ctx);

    /* cap > 0: a capped insert (see cred_insert) counting the org's projects. */
    int (*project_create)(struct store *st, struct project_rec *p, int64_t cap);
    /* By id, or else by exact name, within org. */
    int (*project_get)(struct store *st, const char *org_id, const char *id_or_name,
                       struct project_rec *out);
    int (*project_list)(struct store *st, const char *org_id, const struct name_filter *f,
                        struct page *pg, struct project_rec **rows, size_t *n);
    int (*project_update)(struct store *st, const struct project_rec *p);
    /* Refuses (E_CONFLICT) to delete the org's last active project; moves the
     * org's default to the oldest remaining active project when the default is
     * deleted. project_update likewise refuses to archive the last active
     * project and moves the default off an archived one. */
    int (*project_delete)(struct store *st, const char *org_id, const char *id);

    /* cap > 0: a capped insert (see cred_insert) counting the org's live keys
     * (neither deleted nor expired); in the same transaction the org's ended
     * keys past the LIM_API_KEYS_ENDED_KEPT newest are deleted, so a loop of
     * creates and deletes cannot grow the table. cap 0: the operator's
     * (admin API, bootstrap key), neither counted nor pruned. */
    int (*key_create)(struct store *st, struct apikey_rec *k, int64_t cap);
    int (*key_get)(struct store *st, const char *org_id, const char *id, struct apikey_rec *out);
    int (*key_by_hash)(struct store *st, const char *hash, struct apikey_rec *out);
    /* The key with that hash and its org, in one read (the hot path of every
     * authenticated request). The org's overrides are owned by *org. A
     * backend may answer from a cache, but exactly: a change committed by
     * any connection or process before the call is seen (store/keycache.h). */
    int (*auth_lookup)(struct store *st, const char *hash, struct apikey_rec *key,
                       struct org_rec *org);
    int (*key_list)(struct store *st, const char *org_id, const struct name_filter *f,
                    struct page *pg, struct apikey_rec **rows, size_t *n);
    int (*key_update)(struct store *st, const struct apikey_rec *k);
    /* Creates fresh (new) and sets old's expiry to old_expires_at, atomically;
     * fresh is counted and the ended keys pruned as by key_create's cap. */
    int (*key_rotate)(struct store *st, const char *org_id, const char *old_id,
                      int64_t old_expires_at, struct apikey_rec *fresh, int64_t cap);

    /* Sessions. Insert fails with E_CONFLICT when an active session of the
     * project already has the (non-empty) name. */
    int (*session_insert)(struct store *st, const struct session_rec *s);
    /* By id, or else by name among the project's active sessions. A
     * project_id of "" finds a session of any project of the org, by id only
     * (a session's own URL, whose token names the org and the session). */
    int (*session_get)(struct store *st, const char *org_id, const char *project_id,
                       const char *id_or_name, int include_deleted, struct session_rec *out);
    int (*session_list)(struct store *st, const char *org_id, const char *project_id,
                        const struct session_filter *f, struct page *pg, struct session_rec **rows,
                        size_t *n);
    /* Writes every column of s (by id). E_CONFLICT on a duplicate active name.
     * When s ends (status deleted) the org's ended sessions past the newest
     * st->sessions_ended_kept (by deleted_at, then id) are deleted with
     * their telemetry events, in the same transaction; never on insert (the
     * create path stays one write). The bulk ends of node_sweep and
     * node_retire do not prune: each org's next end does. */
    int (*session_update)(struct store *st, const struct session_rec *s);
    /* Active sessions of every org (crash recovery at start). */
    int (*session_list_active)(struct store *st, struct session_rec **rows, size_t *n);

    /* Profiles. Create fills id and times; E_CONFLICT when the project
     * already has a profile with that (non-empty) name. */
    int (*profile_create)(struct store *st, struct profile_rec *p);
    /* By id, or else by exact name, within the org's project. */
    int (*profile_get)(struct store *st, const char *org_id, const char *project_id,
                       const char *id_or_name, struct profile_rec *out);
    /* A profile by id alone (session hooks, outside any request). */
    int (*profile_get_by_id)(struct store *st, const char *id, struct profile_rec *out);
    int (*profile_list)(struct store *st, const char *org_id, const char *project_id,
                        const struct profile_filter *f, struct page *pg, struct profile_rec **rows,
                        size_t *n);
    /* Profiles of the org, every project (limits.max_profiles). */
    int (*profile_count)(struct store *st, const char *org_id, int64_t *n);
    /* The ids of the org's profiles, every project (*ids xmalloc'd, n of
     * them; the bytes its archives hold on disk, LIM_PROFILE_ORG_BYTES). */
    int (*profile_ids)(struct store *st, const char *org_id, char (**ids)[STORE_ID], size_t *n);
    /* Writes name and updated_at (by id). E_CONFLICT on a duplicate name. */
    int (*profile_update)(struct store *st, const struct profile_rec *p);
    /* Moves last_used_at and/or updated_at to the given times (0 leaves a
     * column unchanged), without reading first. E_NOTFOUND when deleted. */
    int (*profile_touch)(struct store *st, const char *id, int64_t last_used_at,
                         int64_t updated_at);
    int (*profile_delete)(struct store *st, const char *org_id, const char *project_id,
                          const char *id);
    /* ops: profiles */
    /* Pools. Insert/update fail with E_CONFLICT on a duplicate active name in
     * the project. get finds active pools by id, or else by name. */
    int (*pool_insert)(struct store *st, const struct pool_rec *p);
    int (*pool_get)(struct store *st, const char *org_id, const char *project_id,
                    const char *id_or_name, struct pool_rec *out);
    /* region (NULL: any) filters on the config's region; a pool stored
     * without one reads as region_default. */
    int (*pool_list)(struct store *st, const char *org_id, const char *project_id, const char *name,
                     const char *query, const char *region, const char *region_default,
                     struct page *pg, struct pool_rec **rows, size_t *n);
    int (*pool_update)(struct store *st, const struct pool_rec *p);
    int (*pool_list_active)(struct store *st, struct pool_rec **rows, size_t *n);
    /* ops: pools */
    /* Proxies. Names are not unique. get/delete/update address one proxy by
     * id (get and delete within a project); find returns every proxy of the
     * org whose id or name equals ref (at most 100), for session selection.
     * insert with cap > 0 is a capped insert (see cred_insert) counting the
     * org's proxies in every project. */
    int (*proxy_insert)(struct store *st, const struct proxy_rec *p, int64_t cap);
    int (*proxy_get)(struct store *st, const char *org_id, const char *project_id, const char *id,
                     struct proxy_rec *out);
    int (*proxy_find)(struct store *st, const char *org_id, const char *ref,
                      struct proxy_rec **rows, size_t *n);
    /* name: exact name or NULL; query: substring of the name or NULL. */
    int (*proxy_list)(struct store *st, const char *org_id, const char *project_id,
                      const char *name, const char *query, struct page *pg, struct proxy_rec **rows,
                      size_t *n);
    /* Writes name, status, last_checked and data (by id and org). */
    int (*proxy_update)(struct store *st, const struct proxy_rec *p);
    int (*proxy_delete)(struct store *st, const char *org_id, const char *project_id,
                        const char *id);
    /* ops: proxies */
    /* Telemetry events: insert n rows of one session in one transaction
     * (an existing (session, seq) is kept); list a page; the newest seq (0
     * when none); delete events older than before_ms. */
    int (*telem_events_insert)(struct store *st, const char *session_id,
                               const struct telem_event_rec *rows, size_t n);
    int (*telem_events_list)(struct store *st, const char *session_id, const struct telem_query *q,
                             struct page *pg, struct telem_event_rec **rows, size_t *n);
    int (*telem_events_max_seq)(struct store *st, const char *session_id, int64_t *out);
    int (*telem_events_purge)(struct store *st, int64_t before_ms, int64_t *deleted);
    /* The bytes of stored events (their data) of each organization with any
     * (by the sessions' org_id): fn once per organization. */
    int (*telem_bytes_by_org)(struct store *st,
                              void (*fn)(void *ctx, const char *org_id, int64_t bytes), void *ctx);
    /* Deletes the org's oldest events (by ts) until at least bytes of data
     * are gone or none is left; *freed the bytes deleted. */
    int (*telem_events_trim_org)(struct store *st, const char *org_id, int64_t bytes,
                                 int64_t *freed);
    /* OTLP destinations: names unique per org (E_CONFLICT); get by id, or
     * else by exact name, within org. create: E_LIMIT when cap > 0 and the
     * org has cap destinations already (a capped insert: see cred_insert). */
    int (*otlp_dest_create)(struct store *st, struct otlp_dest_rec *d, int64_t cap);
    int (*otlp_dest_get)(struct store *st, const char *org_id, const char *id_or_name,
                         struct otlp_dest_rec *out);
    int (*otlp_dest_list)(struct store *st, const char *org_id, struct page *pg,
                          struct otlp_dest_rec **rows, size_t *n);
    int (*otlp_dest_update)(struct store *st, const struct otlp_dest_rec *d);
    int (*otlp_dest_delete)(struct store *st, const char *org_id, const char *id);
    /* ops: telemetry */
    /* Audit log entries: insert n rows in one transaction (ids filled);
     * list a page of one organization's; delete up to max entries older
     * than before_ms (*deleted says how many); trim deletes org's entries
     * past its newest keep (by ts, then id; by the (org_id, ts, id) index),
     * never another organization's (*deleted says how many). */
    int (*audit_insert)(struct store *st, struct audit_rec *rows, size_t n);
    int (*audit_list)(struct store *st, const char *org_id, const struct audit_query *q,
                      struct page *pg, struct audit_rec **rows, size_t *n);
    int (*audit_prune)(struct store *st, int64_t before_ms, int64_t max, int64_t *deleted);
    int (*audit_trim)(struct store *st, const char *org_id, int64_t keep, int64_t *deleted);
    /* ops: audit */
    /* Extensions. create fills id and created_at; E_CONFLICT when the
     * project already has one with that (non-empty) name. get finds by id,
     * or else by exact name, within the org's project. list: name is an
     * exact case-insensitive name, query a case-insensitive substring of the
     * name or an exact id (NULL = any). count: the org's stored extensions.
     * touch sets last_used_at (E_NOTFOUND when deleted). */
    int (*ext_create)(struct store *st, struct ext_rec *x);
    int (*ext_get)(struct store *st, const char *org_id, const char *project_id,
                   const char *id_or_name, struct ext_rec *out);
    int (*ext_list)(struct store *st, const char *org_id, const char *project_id, const char *name,
                    const char *query, struct page *pg, struct ext_rec **rows, size_t *n);
    int (*ext_count)(struct store *st, const char *org_id, int64_t *n);
    int (*ext_touch)(struct store *st, const char *id, int64_t last_used_at);
    int (*ext_delete)(struct store *st, const char *org_id, const char *project_id, const char *id);
    /* ops: extensions */
    /* Credentials. insert/update fail with E_CONFLICT on a duplicate name in
     * the project; get finds one by id, or else by name; list filters by exact
     * domain and a substring of the name (NULL = any); count is per org.
     * insert with cap > 0 is a capped insert: E_LIMIT (nothing written) when
     * the org holds cap credentials already, counted and inserted as one
     * step per org on every node (PostgreSQL: under the org's row lock;
     * SQLite: in one BEGIN IMMEDIATE transaction); cap <= 0: no count. */
    int (*cred_insert)(struct store *st, const struct cred_rec *c, int64_t cap);
    int (*cred_get)(struct store *st, const char *org_id, const char *project_id,
                    const char *id_or_name, struct cred_rec *out);
    int (*cred_list)(struct store *st, const char *org_id, const char *project_id,
                     const char *domain, const char *query, struct page *pg, struct cred_rec **rows,
                     size_t *n);
    int (*cred_count)(struct store *st, const char *org_id, int64_t *n);
    /* Writes name, updated_at and data (by id and org). */
    int (*cred_update)(struct store *st, const struct cred_rec *c);
    int (*cred_delete)(struct store *st, const char *org_id, const char *project_id,
                       const char *id);
    /* ops: credentials */
    /* Vaults and their items in one table (vault_id "" = a vault). insert:
     * E_CONFLICT on a duplicate name in the vault (project), with cap > 0
     * E_LIMIT when the org has cap rows of v's vault_id already (a capped
     * insert: see cred_insert); get: by id or
     * name within vault_id; list: by creation, query a substring of the name;
     * count: the rows of vault_id in the org; update: writes data, version and
     * updated_at when the stored version is expected_version (else
     * E_CONFLICT, E_NOTFOUND when the row is gone); delete: the row and, for
     * a vault, its items. */
    int (*vault_insert)(struct store *st, const struct vault_rec *v, int64_t cap);
    int (*vault_get)(struct store *st, const char *org_id, const char *project_id,
                     const char *vault_id, const char *id_or_name, struct vault_rec *out);
    int (*vault_list)(struct store *st, const char *org_id, const char *project_id,
                      const char *vault_id, const char *query, struct page *pg,
                      struct vault_rec **rows, size_t *n);
    int (*vault_count)(struct store *st, const char *org_id, const char *vault_id, int64_t *n);
    int (*vault_update)(struct store *st, const struct vault_rec *v, int64_t expected_version);
    int (*vault_delete)(struct store *st, const char *org_id, const char *project_id,
                        const char *id);
    /* ops: vaults */
    /* Managed auth connections. insert: E_CONFLICT for a second one of a
     * profile and domain in the project; list: by creation, each filter NULL
     * = any (org_id and project_id NULL: every organization's, for the health
     * checks); update writes updated_at and data (by id and org); insert
     * with cap > 0: E_LIMIT when the org has cap connections already (a
     * capped insert: see cred_insert). */
    int (*ac_insert)(struct store *st, const struct authconn_rec *c, int64_t cap);
    int (*ac_get)(struct store *st, const char *org_id, const char *project_id, const char *id,
                  struct authconn_rec *out);
    int (*ac_list)(struct store *st, const char *org_id, const char *project_id,
                   const char *profile_name, const char *domain, struct page *pg,
                   struct authconn_rec **rows, size_t *n);
    int (*ac_count)(struct store *st, const char *org_id, int64_t *n);
    int (*ac_update)(struct store *st, const struct authconn_rec *c);
    int (*ac_delete)(struct store *st, const char *org_id, const char *project_id, const char *id);
    /* A shared store only (SQLite: NULL; one process counts its flows in
     * memory). Writes c's updated_at and data (the first state of a flow
     * that node_id runs) only while the org's other connections whose flow
     * is IN_PROGRESS and not past its flow_expires_at stay below limit, and
     * c's own stored flow is not IN_PROGRESS on another node; serialized per
     * org (the org's row locked). E_LIMIT when full (*running, may be NULL,
     * receives the count), E_CONFLICT when another node runs c's flow,
     * E_NOTFOUND when c is gone. Nothing is written unless 0. */
    int (*ac_flow_admit)(struct store *st, const struct authconn_rec *c, const char *node_id,
                         int64_t limit, int64_t *running);
    /* ops: authconn */
    /* Searches (docs/search.md): search_put stores a Search record (its
     * JSON text) of org until expires_at (ms since the epoch), keeping only
     * org's LIM_SEARCH_STORED_PER_ORG newest (older ones are deleted in the
     * same call); search_get
     * reads it back while now < expires_at (else E_NOTFOUND, as for
     * another org's id) into *json (caller frees); search_prune deletes
     * the records expired at now. */
    int (*search_put)(struct store *st, const char *id, const char *org_id, int64_t created_at,
                      int64_t expires_at, const char *json);
    int (*search_get)(struct store *st, const char *org_id, const char *id, int64_t now,
                      char **json);
    int (*search_prune)(struct store *st, int64_t now);
    /* Config registry (docs/config-registry.md), per organization (another
     * org's id or domain is E_NOTFOUND). cfgreg_analysis_put inserts or
     * replaces an analysis record (JSON text); _get reads it into *json
     * (caller frees); _list pages an org's analyses, newest first, whose
     * domain holds search (NULL = any). cfgreg_entry_put inserts or replaces
     * the entry of (org, domain); _get and _list as for analyses, sorted by
     * sort then domain. Rows: xfree each json, then the array.
     * cfgreg_prune keeps an org's newest keep_analyses analyses (by
     * created_at) and keep_entries entries (by last_requested_at). */
    int (*cfgreg_analysis_put)(struct store *st, const char *org_id, const char *id,
                               const char *domain, int64_t created_at, const char *json);
    int (*cfgreg_analysis_get)(struct store *st, const char *org_id, const char *id, char **json);
    int (*cfgreg_analysis_list)(struct store *st, const char *org_id, const char *search,
                                struct page *pg, struct cfgreg_text **rows, size_t *n);
    int (*cfgreg_entry_put)(struct store *st, const struct cfgreg_entry_rec *r);
    int (*cfgreg_entry_get)(struct store *st, const char *org_id, const char *domain, char **json);
    int (*cfgreg_entry_list)(struct store *st, const char *org_id, const char *search,
                             enum cfgreg_sort sort, int descending, struct page *pg,
                             struct cfgreg_text **rows, size_t *n);
    int (*cfgreg_prune)(struct store *st, const char *org_id, size_t keep_analyses,
                        size_t keep_entries);
    /* cfgreg_running pages every organization's entries whose analysis is
     * running on node_id (NULL: on any node; org_id and the entry's JSON
     * text per row); cfgreg_entry_settle sets the entry's analysis_status
     * and record only while its analysis_status is still was (E_NOTFOUND
     * otherwise). The node is a column beside the record, never in it. */
    int (*cfgreg_running)(struct store *st, const char *node_id, struct page *pg,
                          struct cfgreg_text **rows, size_t *n);
    int (*cfgreg_entry_settle)(struct store *st, const char *org_id, const char *domain,
                               const char *status, const char *json, const char *was);
    /* Apps (api/apps.h): appobj_put inserts a record or, for an existing
     * id, replaces its app_name, status, bytes, updated_at and data; get reads one
     * of the project by kind and id (E_NOTFOUND for another project's);
     * list: newest first, app_name / version / status NULL = any, and each
     * of match1 / match2 (NULL = any) a substring data must hold; delete:
     * E_NOTFOUND when absent; bytes: the sum of bytes over the org's
     * records of kind. */
    int (*appobj_put)(struct store *st, const struct appobj_rec *r);
    int (*appobj_get)(struct store *st, const char *org_id, const char *project_id,
                      const char *kind, const char *id, struct appobj_rec *out);
    int (*appobj_list)(struct store *st, const char *org_id, const char *project_id,
                       const char *kind, const char *app_name, const char *version,
                       const char *status, const char *match1, const char *match2, struct page *pg,
                       struct appobj_rec **rows, size_t *n);
    int (*appobj_delete)(struct store *st, const char *org_id, const char *project_id,
                         const char *kind, const char *id);
    int (*appobj_bytes)(struct store *st, const char *org_id, const char *kind, int64_t *n);
    /* The records of every organization a run still moves on (an invocation
     * queued or running, a deployment queued or in_progress), oldest first,
     * one page of pg. settle writes r's status, bytes, updated_at and data only
     * while the stored status is still was: E_NOTFOUND when it moved on (or
     * the record is gone), so that of two nodes ending one record one does. */
    int (*appobj_unfinished)(struct store *st, struct page *pg, struct appobj_rec **rows,
                             size_t *n);
    int (*appobj_settle)(struct store *st, const struct appobj_rec *r, const char *was);

    /*
     * Cluster ops (store/README in docs/multinode.md). A backend that several
     * processes can share (PostgreSQL) fills all of them; an embedded one
     * (SQLite) leaves them NULL, and callers check store_shared().
     *
     * node_register inserts n as up with heartbeat_at = started_at = now
     * (the database's clock) and fills those times (and n->id, when empty,
     * with a new id). node_heartbeat moves the heartbeat to now and sets
     * running, only while the node is up:
     * E_NOTFOUND once it was declared dead (it must fence itself).
     * node_get by id (any state); node_list the up nodes, oldest first.
     *
     * node_sweep declares dead every up node whose heartbeat is older than
     * lease_ms, and in the same transaction ends their active sessions
     * (status deleted, end_reason "node lost", deleted_at = the node's last
     * heartbeat, uptime_ms = that - created_at (>= 0), usage_status ready)
     * and moves their active pools to heir (NULL or "": pools stay where
     * they are). A session's node_id is written by session_insert and
     * session_admit ("" stores "local") and by these ops, never by
     * session_update. Each dead node is returned (*dead, xfree'd by the
     * caller, *n entries) to exactly one sweeper.
     * node_retire does the same to one node at once, with end_reason
     * `reason` and deleted_at = now (a clean stop, or a restart reaping its
     * own earlier incarnations); E_NOTFOUND when it is not up.
     */
    int (*node_register)(struct store *st, struct node_rec *n);
    int (*node_heartbeat)(struct store *st, const char *id, int64_t running);
    int (*node_get)(struct store *st, const char *id, struct node_rec *out);
    int (*node_list)(struct store *st, struct node_rec **rows, size_t *n);
    int (*node_sweep)(struct store *st, int64_t lease_ms, const char *heir, char (**dead)[STORE_ID],
                      size_t *n);
    int (*node_retire)(struct store *st, const char *id, const char *reason, const char *heir);
    /* The records a dead node leaves (docs/multinode.md): node_sweep also
     * claims each node it declares dead for the sweeper (heir) for lease_ms;
     * node_orphans_done(id) says they were ended (the claim is dropped).
     * node_orphans_claim gives `me` (for claim_ms) every dead node whose
     * claim ran out before that, each to one caller (row locks): its
     * sweeper died, or took longer than its claim, before it was done.
     * *dead is xfree'd by the caller. node_retire claims nothing. */
    int (*node_orphans_claim)(struct store *st, const char *me, int64_t claim_ms,
                              char (**dead)[STORE_ID], size_t *n);
    int (*node_orphans_done)(struct store *st, const char *id);
    /* An organization's slots of a cluster-wide cap (cluster/orgslot.h):
     * org_slot_take inserts a slot of kind held by node_id (its new id into
     * id) only while the org's live slots of that kind stay below limit,
     * read in the same transaction, serialized per org (its row lock). A
     * slot is live while its node is up and for ttl_ms after the take (the
     * database's clock); the org's expired ones are deleted by the take.
     * E_LIMIT when full (*held, may be NULL, receives the live count),
     * E_NOTFOUND when the org does not exist. org_slot_give deletes slot id
     * (a missing one is 0). node_sweep and node_retire delete the slots of
     * the nodes they end, in their transaction. */
    int (*org_slot_take)(struct store *st, const char *kind, const char *org_id,
                         const char *node_id, int64_t limit, int64_t ttl_ms, char id[STORE_ID],
                         int64_t *held);
    int (*org_slot_give)(struct store *st, const char *id);
    /* Inserts s (an active standalone session, not a pool's) only while the
     * org's active standalone sessions plus the sizes of its active pools
     * (config's "size") stay below limit (< 0: no limit), and the same two
     * counted for s's project stay below the project's limit (limits_get:
     * its own max_sessions, else the org's default; neither: none), read in
     * the same transaction, serialized per org across every connection and
     * process. E_LIMIT when full (nothing inserted), E_CONFLICT on a
     * duplicate active name, E_NOTFOUND when the org does not exist (a
     * shared store). A standalone session is one whose data has no
     * top-level "pool" key. *pools (may be NULL) receives the org's pool
     * capacity seen by the check (also on E_LIMIT), or the project's when
     * the project's limit refused; then *project_limit (may be NULL)
     * receives that limit, else -1. Both backends (SQLite: the session
     * manager keeps the org's books, callers pass limit -1). */
    int (*session_admit)(struct store *st, const struct session_rec *s, int64_t limit,
                         int64_t *pools, int64_t *project_limit);
    /* pool_insert (is_update 0) or pool_update (1) of p, only while the
     * org's pool sizes with p's new size plus its active standalone
     * sessions stay within limit (< 0: no limit), and the same for p's
     * project within the project's limit, under the same per-org
     * serialization: E_LIMIT when it would not (nothing written). *pools
     * and *sessions (may be NULL) receive what the check counted (pools
     * with p's new size; the project's when its limit refused, which
     * *project_limit receives, else -1). A p whose new status is not
     * active counts as size 0 and is never refused (deleting a pool frees
     * capacity even when a lowered limit is already exceeded). */
    int (*pool_admit)(struct store *st, const struct pool_rec *p, int is_update, int64_t limit,
                      int64_t *pools, int64_t *sessions, int64_t *project_limit);
    /* A project's limits (project_id "": the org's), zeros when none were
     * set; limits_put creates or replaces r. */
    int (*limits_get)(struct store *st, const char *org_id, const char *project_id,
                      struct limits_rec *out);
    int (*limits_put)(struct store *st, const struct limits_rec *r);
    /* Active sessions of one node (a restart reaps its earlier incarnation). */
    int (*session_list_node)(struct store *st, const char *node_id, struct session_rec **rows,
                             size_t *n);
    /* Active pools homed on one node. */
    int (*pool_list_node)(struct store *st, const char *node_id, struct pool_rec **rows, size_t *n);
    /* Bytes every node can read (profile archives, extension zips), by key.
     * put replaces (E_TOOBIG from 1 GiB, PostgreSQL's largest value); get
     * returns an xmalloc'd copy (E_NOTFOUND when absent); delete of a
     * missing key is 0. */
    int (*blob_put)(struct store *st, const char *key, const void *data, size_t len);
    int (*blob_get)(struct store *st, const char *key, void **data, size_t *len);
    int (*blob_delete)(struct store *st, const char *key);
    /* Runs once across the cluster: takes a database-wide lock named by key
     * for the life of the call to fn (bootstrap of an empty database). */
    int (*run_exclusive)(struct store *st, const char *key, int (*fn)(void *ctx), void *ctx);
};

struct store {
    const struct store_ops *ops;
    /* The ended sessions each organization keeps (session_update prunes
     * past them); LIM_SESSIONS_ENDED_KEPT from the open, lowered by the
     * server's BROWSERD_SESSIONS_ENDED_KEPT before any request. */
    int64_t sessions_ended_kept;
};

/* Opens the embedded SQLite store in dir (created if missing), applying
 * pending schema migrations. */
int store_open_sqlite(const char *dir, struct store **out, struct err *e) WUR;
/* Opens a shared PostgreSQL store at url (a libpq URI, "postgresql://..."),
 * applying pending migrations exactly once even when several processes start
 * together (an advisory lock). */
int store_open_pg(const char *url, struct store **out, struct err *e) WUR;
/* Opens url: "postgresql://..." or "postgres://..." selects PostgreSQL,
 * anything else is refused (E_INVALID); NULL or "" opens SQLite in dir. */
int store_open(const char *url, const char *dir, struct store **out, struct err *e) WUR;
/* 1 when several processes may share the store (the cluster ops are filled). */
#define store_shared(st) ((st)->ops->node_register != NULL)
/* Closes and frees; accepts NULL. */
void store_close(struct store *st);

void org_rec_clear(struct org_rec *o);

/* Thin wrappers, so call sites read as verbs. */
#define store_meta_get(st, ...)            ((st)->ops->meta_get((st), __VA_ARGS__))
#define store_meta_init(st, ...)           ((st)->ops->meta_init((st), __VA_ARGS__))
#define store_org_count(st, ...)           ((st)->ops->org_count((st), __VA_ARGS__))
#define store_org_create(st, ...)          ((st)->ops->org_create((st), __VA_ARGS__))
#define store_org_get(st, ...)             ((st)->ops->org_get((st), __VA_ARGS__))
#define store_org_update(st, ...)          ((st)->ops->org_update((st), __VA_ARGS__))
#define store_plan_get(st, ...)            ((st)->ops->plan_get((st), __VA_ARGS__))
#define store_plan_put(st, ...)            ((st)->ops->plan_put((st), __VA_ARGS__))
#define store_plan_each(st, ...)           ((st)->ops->plan_each((st), __VA_ARGS__))
#define store_project_create(st, ...)      ((st)->ops->project_create((st), __VA_ARGS__))
#define store_project_get(st, ...)         ((st)->ops->project_get((st), __VA_ARGS__))
#define store_project_list(st, ...)        ((st)->ops->project_list((st), __VA_ARGS__))
#define store_project_update(st, ...)      ((st)->ops->project_update((st), __VA_ARGS__))
#define store_project_delete(st, ...)      ((st)->ops->project_delete((st), __VA_ARGS__))
#define store_key_create(st, ...)          ((st)->ops->key_create((st), __VA_ARGS__))
#define store_key_get(st, ...)             ((st)->ops->key_get((st), __VA_ARGS__))
#define store_key_by_hash(st, ...)         ((st)->ops->key_by_hash((st), __VA_ARGS__))
#define store_auth_lookup(st, ...)         ((st)->ops->auth_lookup((st), __VA_ARGS__))
#define store_session_insert(st, ...)      ((st)->ops->session_insert((st), __VA_ARGS__))
#define store_session_get(st, ...)         ((st)->ops->session_get((st), __VA_ARGS__))
#define store_session_list(st, ...)        ((st)->ops->session_list((st), __VA_ARGS__))
#define store_session_update(st, ...)      ((st)->ops->session_update((st), __VA_ARGS__))
#define store_session_list_active(st, ...) ((st)->ops->session_list_active((st), __VA_ARGS__))
#define store_profile_create(st, ...)      ((st)->ops->profile_create((st), __VA_ARGS__))
#define store_profile_get(st, ...)         ((st)->ops->profile_get((st), __VA_ARGS__))
#define store_profile_get_by_id(st, ...)   ((st)->ops->profile_get_by_id((st), __VA_ARGS__))
#define store_profile_list(st, ...)        ((st)->ops->profile_list((st), __VA_ARGS__))
#define store_profile_count(st, ...)       ((st)->ops->profile_count((st), __VA_ARGS__))
#define store_profile_ids(st, ...)         ((st)->ops->profile_ids((st), __VA_ARGS__))
#define store_profile_update(st, ...)      ((st)->ops->profile_update((st), __VA_ARGS__))
#define store_profile_touch(st, ...)       ((st)->ops->profile_touch((st), __VA_ARGS__))
#define store_profile_delete(st, ...)      ((st)->ops->profile_delete((st), __VA_ARGS__))
/* wrappers: profiles */
#define store_pool_insert(st, ...)      ((st)->ops->pool_insert((st), __VA_ARGS__))
#define store_pool_get(st, ...)         ((st)->ops->pool_get((st), __VA_ARGS__))
#define store_pool_list(st, ...)        ((st)->ops->pool_list((st), __VA_ARGS__))
#define store_pool_update(st, ...)      ((st)->ops->pool_update((st), __VA_ARGS__))
#define store_pool_list_active(st, ...) ((st)->ops->pool_list_active((st), __VA_ARGS__))
/* wrappers: pools */
#define store_proxy_insert(st, ...) ((st)->ops->proxy_insert((st), __VA_ARGS__))
#define store_proxy_get(st, ...)    ((st)->ops->proxy_get((st), __VA_ARGS__))
#define store_proxy_find(st, ...)   ((st)->ops->proxy_find((st), __VA_ARGS__))
#define store_proxy_list(st, ...)   ((st)->ops->proxy_list((st), __VA_ARGS__))
#define store_proxy_update(st, ...) ((st)->ops->proxy_update((st), __VA_ARGS__))
#define store_proxy_delete(st, ...) ((st)->ops->proxy_delete((st), __VA_ARGS__))
/* wrappers: proxies */
#define store_telem_events_insert(st, ...)   ((st)->ops->telem_events_insert((st), __VA_ARGS__))
#define store_telem_events_list(st, ...)     ((st)->ops->telem_events_list((st), __VA_ARGS__))
#define store_telem_events_max_seq(st, ...)  ((st)->ops->telem_events_max_seq((st), __VA_ARGS__))
#define store_telem_events_purge(st, ...)    ((st)->ops->telem_events_purge((st), __VA_ARGS__))
#define store_telem_bytes_by_org(st, ...)    ((st)->ops->telem_bytes_by_org((st), __VA_ARGS__))
#define store_telem_events_trim_org(st, ...) ((st)->ops->telem_events_trim_org((st), __VA_ARGS__))
#define store_otlp_dest_create(st, ...)      ((st)->ops->otlp_dest_create((st), __VA_ARGS__))
#define store_otlp_dest_get(st, ...)         ((st)->ops->otlp_dest_get((st), __VA_ARGS__))
#define store_otlp_dest_list(st, ...)        ((st)->ops->otlp_dest_list((st), __VA_ARGS__))
#define store_otlp_dest_update(st, ...)      ((st)->ops->otlp_dest_update((st), __VA_ARGS__))
#define store_otlp_dest_delete(st, ...)      ((st)->ops->otlp_dest_delete((st), __VA_ARGS__))
/* wrappers: telemetry */
#define store_audit_insert(st, ...) ((st)->ops->audit_insert((st), __VA_ARGS__))
#define store_audit_list(st, ...)   ((st)->ops->audit_list((st), __VA_ARGS__))
#define store_audit_prune(st, ...)  ((st)->ops->audit_prune((st), __VA_ARGS__))
#define store_audit_trim(st, ...)   ((st)->ops->audit_trim((st), __VA_ARGS__))
/* wrappers: audit */
#define store_ext_create(st, ...) ((st)->ops->ext_create((st), __VA_ARGS__))
#define store_ext_get(st, ...)    ((st)->ops->ext_get((st), __VA_ARGS__))
#define store_ext_list(st, ...)   ((st)->ops->ext_list((st), __VA_ARGS__))
#define store_ext_count(st, ...)  ((st)->ops->ext_count((st), __VA_ARGS__))
#define store_ext_touch(st, ...)  ((st)->ops->ext_touch((st), __VA_ARGS__))
#define store_ext_delete(st, ...) ((st)->ops->ext_delete((st), __VA_ARGS__))
/* wrappers: extensions */
#define store_cred_insert(st, ...) ((st)->ops->cred_insert((st), __VA_ARGS__))
#define store_cred_get(st, ...)    ((st)->ops->cred_get((st), __VA_ARGS__))
#define store_cred_list(st, ...)   ((st)->ops->cred_list((st), __VA_ARGS__))
#define store_cred_count(st, ...)  ((st)->ops->cred_count((st), __VA_ARGS__))
#define store_cred_update(st, ...) ((st)->ops->cred_update((st), __VA_ARGS__))
#define store_cred_delete(st, ...) ((st)->ops->cred_delete((st), __VA_ARGS__))
/* wrappers: credentials */
#define store_vault_insert(st, ...) ((st)->ops->vault_insert((st), __VA_ARGS__))
#define store_vault_get(st, ...)    ((st)->ops->vault_get((st), __VA_ARGS__))
#define store_vault_list(st, ...)   ((st)->ops->vault_list((st), __VA_ARGS__))
#define store_vault_count(st, ...)  ((st)->ops->vault_count((st), __VA_ARGS__))
#define store_vault_update(st, ...) ((st)->ops->vault_update((st), __VA_ARGS__))
#define store_vault_delete(st, ...) ((st)->ops->vault_delete((st), __VA_ARGS__))
/* wrappers: extensions */
#define store_ac_insert(st, ...) ((st)->ops->ac_insert((st), __VA_ARGS__))
#define store_ac_get(st, ...)    ((st)->ops->ac_get((st), __VA_ARGS__))
#define store_ac_list(st, ...)   ((st)->ops->ac_list((st), __VA_ARGS__))
#define store_ac_count(st, ...)  ((st)->ops->ac_count((st), __VA_ARGS__))
#define store_ac_update(st, ...) ((st)->ops->ac_update((st), __VA_ARGS__))
#define store_ac_delete(st, ...) ((st)->ops->ac_delete((st), __VA_ARGS__))
/* A shared store only (store_shared). */
#define store_ac_flow_admit(st, ...) ((st)->ops->ac_flow_admit((st), __VA_ARGS__))
/* wrappers: authconn */
#define store_search_put(st, ...)          ((st)->ops->search_put((st), __VA_ARGS__))
#define store_search_get(st, ...)          ((st)->ops->search_get((st), __VA_ARGS__))
#define store_search_prune(st, ...)        ((st)->ops->search_prune((st), __VA_ARGS__))
#define store_cfgreg_running(st, ...)      ((st)->ops->cfgreg_running((st), __VA_ARGS__))
#define store_cfgreg_entry_settle(st, ...) ((st)->ops->cfgreg_entry_settle((st), __VA_ARGS__))
#define store_appobj_put(st, ...)          ((st)->ops->appobj_put((st), __VA_ARGS__))
#define store_appobj_get(st, ...)          ((st)->ops->appobj_get((st), __VA_ARGS__))
#define store_appobj_list(st, ...)         ((st)->ops->appobj_list((st), __VA_ARGS__))
#define store_appobj_delete(st, ...)       ((st)->ops->appobj_delete((st), __VA_ARGS__))
#define store_appobj_bytes(st, ...)        ((st)->ops->appobj_bytes((st), __VA_ARGS__))
#define store_appobj_unfinished(st, ...)   ((st)->ops->appobj_unfinished((st), __VA_ARGS__))
#define store_appobj_settle(st, ...)       ((st)->ops->appobj_settle((st), __VA_ARGS__))
#define store_node_register(st, ...)       ((st)->ops->node_register((st), __VA_ARGS__))
#define store_node_heartbeat(st, ...)      ((st)->ops->node_heartbeat((st), __VA_ARGS__))
#define store_node_get(st, ...)            ((st)->ops->node_get((st), __VA_ARGS__))
#define store_node_list(st, ...)           ((st)->ops->node_list((st), __VA_ARGS__))
#define store_node_sweep(st, ...)          ((st)->ops->node_sweep((st), __VA_ARGS__))
#define store_node_retire(st, ...)         ((st)->ops->node_retire((st), __VA_ARGS__))
#define store_node_orphans_claim(st, ...)  ((st)->ops->node_orphans_claim((st), __VA_ARGS__))
#define store_node_orphans_done(st, ...)   ((st)->ops->node_orphans_done((st), __VA_ARGS__))
#define store_org_slot_take(st, ...)       ((st)->ops->org_slot_take((st), __VA_ARGS__))
#define store_org_slot_give(st, ...)       ((st)->ops->org_slot_give((st), __VA_ARGS__))
#define store_session_admit(st, ...)       ((st)->ops->session_admit((st), __VA_ARGS__))
#define store_pool_admit(st, ...)          ((st)->ops->pool_admit((st), __VA_ARGS__))
#define store_limits_get(st, ...)          ((st)->ops->limits_get((st), __VA_ARGS__))
#define store_limits_put(st, ...)          ((st)->ops->limits_put((st), __VA_ARGS__))
#define store_session_list_node(st, ...)   ((st)->ops->session_list_node((st), __VA_ARGS__))
#define store_pool_list_node(st, ...)      ((st)->ops->pool_list_node((st), __VA_ARGS__))
#define store_blob_put(st, ...)            ((st)->ops->blob_put((st), __VA_ARGS__))
#define store_blob_get(st, ...)            ((st)->ops->blob_get((st), __VA_ARGS__))
#define store_blob_delete(st, ...)         ((st)->ops->blob_delete((st), __VA_ARGS__))
#define store_run_exclusive(st, ...)       ((st)->ops->run_exclusive((st), __VA_ARGS__))
/* wrappers: config registry */
#define store_cfgreg_analysis_put(st, ...)  ((st)->ops->cfgreg_analysis_put((st), __VA_ARGS__))
#define store_cfgreg_analysis_get(st, ...)  ((st)->ops->cfgreg_analysis_get((st), __VA_ARGS__))
#define store_cfgreg_analysis_list(st, ...) ((st)->ops->cfgreg_analysis_list((st), __VA_ARGS__))
#define store_cfgreg_entry_put(st, ...)     ((st)->ops->cfgreg_entry_put((st), __VA_ARGS__))
#define store_cfgreg_entry_get(st, ...)     ((st)->ops->cfgreg_entry_get((st), __VA_ARGS__))
#define store_cfgreg_entry_list(st, ...)    ((st)->ops->cfgreg_entry_list((st), __VA_ARGS__))
#define store_cfgreg_prune(st, ...)         ((st)->ops->cfgreg_prune((st), __VA_ARGS__))
/* wrappers: cluster */
#define store_key_list(st, ...)   ((st)->ops->key_list((st), __VA_ARGS__))
#define store_key_update(st, ...) ((st)->ops->key_update((st), __VA_ARGS__))
#define store_key_rotate(st, ...) ((st)->ops->key_rotate((st), __VA_ARGS__))

#endif
