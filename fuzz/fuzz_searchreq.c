/* libFuzzer target for domain/searchreq: arbitrary bytes as a POST /search
 * body (the tenant's) into searchreq_parse(), against two configured
 * providers; an accepted request's domain filters are then applied to a few
 * URLs, some taken from the input itself. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "domain/searchreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {"alpha", "beta"};

static const char *const urls[] = {
    "https://example.com/a",
    "http://a.example.com",
    "https://EXAMPLE.COM.:443/x",
    "https://user@example.com/",
    "https://[::1]/",
    "http://",
    "https://xexample.com/",
    "https://a..b/",
    "not a url",
    "",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *body = NULL;
    struct err e;
    err_init(&e);
    if (jsonx_parse((const char *)data, size, LIM_BODY_BYTES, &body, &e) != 0)
        return 0;
    struct searchreq sp;
    err_init(&e);
    if (json_is_object(body) &&
        searchreq_parse(body, names, sizeof names / sizeof names[0], &sp, &e) == 0) {
        for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++)
            (void)searchreq_kept(&sp, urls[i]);
        size_t n;
        json_t *d;
        json_array_foreach(sp.include_domains, n, d)
        {
            char url[300];
            (void)snprintf(url, sizeof url, "https://%s/",
                           json_is_string(d) ? json_string_value(d) : "");
            (void)searchreq_kept(&sp, url);
        }
        for (size_t i = 0; i < sp.norder; i++)
            if (sp.order[i] >= sizeof names / sizeof names[0])
                __builtin_trap();
    }
    json_decref(body);
    return 0;
}
