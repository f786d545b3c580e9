/*
 * api/cfgreg: the config registry (KERNEL_API_NEWER.md 1.4 "Config
 * Registry"; docs/config-registry.md): per organization, a recommended
 * browser configuration for each registrable domain, learned by analyses.
 *
 * POST /config-registry/resolve starts an analysis of a target URL: a
 * bounded list of candidate configurations (browser options, and the
 * organization's proxies of the key's project) is tried one after the
 * other, each by a real browser session made for the caller (POST
 * /browsers run in-process with the caller's own key, so its plan's limits,
 * defaults and network rules apply) that visits the target (the session's
 * curl, through its egress rules) and is deleted; each visit is classified
 * by domain/siteclass. The analysis runs on a job thread (runtime/bgjobs,
 * app->cfgreg_jobs) within a share of analyses in flight per server,
 * organization and project (LIM_CFGREG_ANALYSES*): past it 429. The first
 * accessed candidate becomes the domain's recommendation, whose `browser`
 * is a POST /browsers body. lookup reads the registry only; the analyses
 * and the registry are listed and read per organization (another one's id
 * is 404).
 */
#ifndef BD_API_CFGREG_H
#define BD_API_CFGREG_H

#include "http/http.h"

int cfgreg_lookup(struct req *rq, struct resp *rs);
int cfgreg_resolve(struct req *rq, struct resp *rs);
int cfgreg_list(struct req *rq, struct resp *rs);
int cfgreg_analyses_list(struct req *rq, struct resp *rs);
int cfgreg_analysis_get(struct req *rq, struct resp *rs);

struct app;
/* Ends every analysis left `running` by node (NULL: by any, at the start
 * of a server on its own store, where nothing runs yet; on a cluster, a node
 * that died or an earlier run of a node restarting under its name, the
 * node id its entries were stored with): status `failed`, failure {code,
 * message: reason}, finished_at, in the analysis and in its domain's entry
 * (conditional on the entry's status, store.h cfgreg_entry_settle, so that
 * of two nodes ending one analysis one does); the entry keeps its previous
 * recommendation. Logs what fails. -1 when the running entries could not be
 * listed (some may be left), else 0. */
int cfgreg_end_orphans(struct app *app, const char *node, const char *code, const char *reason);

#endif
