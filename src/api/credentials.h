/*
 * credentials: the /credentials resource (issue 35 item 1; docs/credentials.md).
 *
 * A credential of a project holds values (username, password, ...) and an
 * optional TOTP secret for a domain. Values and the secret are sealed with
 * core/secretbox under the store's meta key "secret_key" (the key that seals
 * proxy passwords) and are never returned, logged or put in telemetry:
 * records show value_keys, has_values and has_totp_secret. The secret opens
 * only to compute a code (GET .../totp-code, or the code shown when a secret
 * was just set), and every clear copy is wiped after use. Gated by
 * features.credentials; LIM_CREDENTIALS_PER_ORG per organization.
 */
#ifndef BD_API_CREDENTIALS_H
#define BD_API_CREDENTIALS_H

#include "http/http.h"

int credentials_create(struct req *rq, struct resp *rs);
int credentials_get(struct req *rq, struct resp *rs);
int credentials_list(struct req *rq, struct resp *rs);
int credentials_update(struct req *rq, struct resp *rs);
int credentials_delete(struct req *rq, struct resp *rs);
int credentials_totp_code(struct req *rq, struct resp *rs);

#endif
