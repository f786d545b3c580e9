/*
 * credprov: the /org/credential_providers resource (issue 35 item 3;
 * docs/credentials.md "Credential providers").
 *
 * A provider of an organization is a 1Password Connect token: the
 * operator's Connect server (BROWSERD_ONEPASSWORD_CONNECT_URL, docs/
 * operator.md) answers its REST API (GET /v1/vaults, GET /v1/vaults/{id}/
 * items) with that token as Bearer. The token is sealed at rest with the
 * store's secret key (api/credentials.h) and never returned. Records live
 * in the vaults table under the reserved vault_id CREDPROV_VAULT_ID,
 * project "" (a provider belongs to the organization). Gated by
 * features.credential_providers; LIM_CREDPROV_PER_ORG per organization and
 * LIM_CREDPROV_CALLS_PER_ORG concurrent Connect calls per organization.
 */
#ifndef BD_API_CREDPROV_H
#define BD_API_CREDPROV_H

#include <jansson.h>
#include <stddef.h>

#include "http/http.h"

#define CREDPROV_VAULT_ID "credential_provider"

int credprov_create(struct req *rq, struct resp *rs);
int credprov_get(struct req *rq, struct resp *rs);
int credprov_list(struct req *rq, struct resp *rs);
int credprov_update(struct req *rq, struct resp *rs);
int credprov_delete(struct req *rq, struct resp *rs);
/* GET .../{id}/items and POST .../{id}/test: blocking (they ask Connect). */
int credprov_items(struct req *rq, struct resp *rs);
int credprov_test(struct req *rq, struct resp *rs);

/* The parsing of what a Connect server answers (its bytes are untrusted:
 * the operator's server, but reached with a tenant's token). Pure: no I/O,
 * no globals; fuzzed by fuzz/fuzz_credprov_answer.c. */

/* A Connect answer's body (len bytes, at most LIM_CREDPROV_RESPONSE_BYTES
 * as httpc read it) as a JSON array in *out (owned). E_UPSTREAM with *out
 * NULL and why (why_cap bytes) saying so when it is not. */
int credprov_answer_parse(const char *body, size_t len, json_t **out, char *why, size_t why_cap)
    __attribute__((warn_unused_result));

/* The vaults of GET /v1/vaults's answer (raw, borrowed, any JSON value) as
 * a new array of {id, name}: entries whose id is 1-64 ASCII letters and
 * digits, name a string ("" when absent), at most LIM_CREDPROV_VAULTS. */
json_t *credprov_vaults_of(const json_t *raw);

/* Appends to items the items of GET /v1/vaults/{id}/items's answer (raw,
 * borrowed, any JSON value) of vault (an entry of credprov_vaults_of's
 * array): {id, path "<vault name>/<title>", title, vault_id, vault_name,
 * urls (at most LIM_CREDPROV_ITEM_URLS hrefs)} for each entry with a
 * string id and title, until items holds LIM_CREDPROV_ITEMS. *bytes counts
 * the text kept across calls; E_UPSTREAM with why set once it passes
 * LIM_CREDPROV_ITEMS_BYTES (items keeps what came before). */
int credprov_items_add(json_t *items, const json_t *vault, const json_t *raw, size_t *bytes,
                       char *why, size_t why_cap) __attribute__((warn_unused_result));

#endif
