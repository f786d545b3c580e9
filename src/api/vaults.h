/*
 * vaults: /vaults and their credential items, and the items' fill operation
 * (issue 35 item 2; docs/credentials.md "Vaults").
 *
 * A vault is upserted by its immutable name; an item of type credential
 * holds values and an optional TOTP secret sealed as a credential's
 * (api/credentials.h), never returned. `fill` writes an item's values into
 * fields of a running browser's page by CSS selector over the server's own
 * DevTools connection to the browser (never the user's relayed one), and
 * answers a per-field outcome, never a value. Wallet and card items answer
 * 501 naming them. Gated by features.vaults and limits.max_vaults.
 */
#ifndef BD_API_VAULTS_H
#define BD_API_VAULTS_H

#include "http/http.h"

int vaults_upsert(struct req *rq, struct resp *rs);
int vaults_list(struct req *rq, struct resp *rs);
int vaults_get(struct req *rq, struct resp *rs);
int vaults_delete(struct req *rq, struct resp *rs);
int vault_items_list(struct req *rq, struct resp *rs);
int vault_item_put(struct req *rq, struct resp *rs);
int vault_item_get(struct req *rq, struct resp *rs);
int vault_item_patch(struct req *rq, struct resp *rs);
int vault_item_delete(struct req *rq, struct resp *rs);
int vault_item_events(struct req *rq, struct resp *rs);
int vault_item_operation(struct req *rq, struct resp *rs);

#endif
