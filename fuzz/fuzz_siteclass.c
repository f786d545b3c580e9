/* libFuzzer target for domain/siteclass: arbitrary bytes as a page's body
 * (a config registry visit, classified), as the visit's telemetry (its
 * responses' URLs, its last URL, a console error, the visible text) and as
 * a target URL. The
 * classification is one of the three outcomes with a reason, the same for
 * the same input; a parsed target's normalized form starts with its scheme
 * and holds its host, and its domain is the host or ends it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "domain/siteclass.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int status = 100 + (data[0] << 8 | data[1]) % 500;
    const char *body = (const char *)data + 2;
    size_t n = size - 2;
    struct siteclass_visit v = {.status = status, .body = body, .body_len = n};
    char r1[96], r2[96];
    enum siteclass_outcome a = siteclass_classify(&v, r1, sizeof r1);
    enum siteclass_outcome b = siteclass_classify(&v, r2, sizeof r2);
    if (a != b || strcmp(r1, r2) != 0 || !r1[0] || (unsigned)a > SITECLASS_INCONCLUSIVE)
        abort();
    char *url = xmalloc(n + 1);
    memcpy(url, body, n);
    url[n] = '\0';
    /* The same bytes as a rendered visit's telemetry. */
    struct siteclass_response rs[2] = {
        {url, status, 1, data[0] & 1},
        {url + strlen(url) / 2, status, (data[1] & 1) == 0,
         siteclass_challenge_header(url, url + strlen(url) / 2, status)},
    };
    const char *console[1] = {url};
    struct siteclass_telemetry tel = {.responses = rs,
                                      .nresponses = 2,
                                      .final_url = (data[0] & 2) ? url : NULL,
                                      .console_errors = console,
                                      .nconsole = (data[0] & 4) ? 1 : 0,
                                      .text = (data[0] & 8) ? url : NULL};
    v.telemetry = &tel;
    a = siteclass_classify(&v, r1, sizeof r1);
    b = siteclass_classify(&v, r2, sizeof r2);
    if (a != b || strcmp(r1, r2) != 0 || !r1[0] || (unsigned)a > SITECLASS_INCONCLUSIVE)
        abort();
    struct siteclass_target t;
    struct err e;
    err_init(&e);
    if (siteclass_target_parse(url, "url", &t, &e) == 0) {
        size_t hl = strlen(t.host), dl = strlen(t.domain);
        if ((strncmp(t.normalized, "http://", 7) != 0 &&
             strncmp(t.normalized, "https://", 8) != 0) ||
            !strstr(t.normalized, t.host) || dl == 0 || dl > hl ||
            strcmp(t.host + hl - dl, t.domain) != 0)
            abort();
    } else if (e.rc != E_INVALID) {
        abort();
    }
    xfree(url);
    return 0;
}
