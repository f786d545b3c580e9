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

#endif
