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

#include <jansson.h>
#include <stdint.h>

#include "http/http.h"

int credentials_create(struct req *rq, struct resp *rs);
int credentials_get(struct req *rq, struct resp *rs);
int credentials_list(struct req *rq, struct resp *rs);
int credentials_update(struct req *rq, struct resp *rs);
int credentials_delete(struct req *rq, struct resp *rs);
int credentials_totp_code(struct req *rq, struct resp *rs);

/* Sealing shared with the vaults' credential items (api/vaults.c). */

/* Loads the store's secret key once (0, or E_INTERNAL with rq->err set). */
int credentials_load_key(struct req *rq) WUR;
/* The loaded key (after credentials_load_key). */
const unsigned char *credentials_key(void);
/* 400 details "is not a field of <what>" for each key of obj not in known
 * (NULL-ended). */
void credentials_check_fields(const json_t *obj, const char *const *known, const char *what,
                              struct err *e);
/* 400 details for a values object ({key: string}) at field. */
void credentials_check_values(const json_t *vals, const char *field, struct err *e);
/* 400 detail for obj's totp_secret (allow_empty: "" removes it). */
int credentials_check_totp(const json_t *obj, int allow_empty, struct err *e);
/* Seals every value of vals into dst (an object of sealed strings). */
int credentials_seal_values(struct req *rq, const json_t *vals, json_t *dst) WUR;
/* The data document of a stored credential or vault item (data: its JSON
 * text; NULL, or text that is no object, reads as {}) with "values" an
 * object, added when missing. A new reference. */
json_t *credentials_doc(const char *data);
/* Seals obj's normalized totp_secret into d["totp"] ("" removes it); *set
 * is 1 when a secret was just set. */
int credentials_seal_totp(struct req *rq, const json_t *obj, json_t *d, int *set) WUR;
/* The current code of a sealed secret (code >= 9 bytes; *expires_ms). */
int credentials_code_of(struct req *rq, const char *sealed, char code[9], int64_t *expires_ms) WUR;
/* Zeroes obj's values and totp_secret strings and the raw request body. */
void credentials_wipe(struct req *rq, json_t *obj);

#endif
