/* libFuzzer target for domain/netcfg: arbitrary JSON into netcfg_validate();
 * a valid config is compiled and matched against a few hosts, some taken
 * from the input itself so that matching sees what validation accepted. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "domain/netcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fixed_hosts[] = {
    "10.0.0.1",
    "172.16.0.1",
    "[fd00::1]",
    "fd00::1",
    "[::ffff:10.0.0.1]",
    "10.1",
    "0xa.0.0.1",
    "example.com",
    "a.example.com",
    "A.EXAMPLE.COM.",
    "intranet",
    "gitlab.corp",
    "x.b.deep.example.com",
    "",
    "[",
    "a..b",
    "1.2.3.4.5",
    "[fe80::1%25eth0]",
    "_x.example.com",
};

static void probe(const struct netcfg *nc, const char *host)
{
    static const int ports[] = {0, 1, 80, 443, 8080, 65535};
    for (size_t p = 0; p < sizeof ports / sizeof ports[0]; p++)
        (void)netcfg_is_private(nc, host, ports[p]);
    int r = netcfg_route_for(nc, host);
    if (r >= 0) {
        const char *id, *name;
        netcfg_route_target(nc, r, &id, &name);
        if ((id == NULL) == (name == NULL))
            abort(); /* exactly one of id / name */
    }
}

/* Strips a leading "*." and a ":port" so entries become plausible hosts. */
static void probe_entry(const struct netcfg *nc, const json_t *s)
{
    char buf[300];
    const char *v = json_string_value(s);
    size_t n = json_string_length(s);
    if (!v || n >= sizeof buf)
        return;
    memcpy(buf, v, n);
    buf[n] = '\0';
    probe(nc, buf);
    if (n > 2 && buf[0] == '*' && buf[1] == '.') {
        buf[0] = 'z';
        probe(nc, buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *doc =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!doc)
        return 0;
    struct err e;
    for (int allow = 0; allow <= 1; allow++) {
        err_init(&e);
        int rc = netcfg_validate("network", doc, allow, &e);
        if (rc != 0 && rc != E_INVALID)
            abort();
        if (rc != 0 && !err_has_fields(&e))
            abort(); /* a rejection always names a field */
    }
    err_init(&e);
    int valid = netcfg_validate("network", doc, 1, &e) == 0;
    struct netcfg *nc = netcfg_compile(doc);
    if ((nc != NULL) != valid)
        abort(); /* "Returns NULL only if v is invalid" */
    if (nc) {
        for (size_t i = 0; i < sizeof fixed_hosts / sizeof fixed_hosts[0]; i++)
            probe(nc, fixed_hosts[i]);
        const json_t *ph = json_object_get(doc, "private_hosts");
        for (size_t i = 0; i < json_array_size(ph); i++)
            probe_entry(nc, json_array_get(ph, i));
        const json_t *pr = json_object_get(doc, "proxy_routes");
        for (size_t i = 0; i < json_array_size(pr); i++) {
            const json_t *hosts = json_object_get(json_array_get(pr, i), "hosts");
            for (size_t k = 0; k < json_array_size(hosts); k++) {
                const json_t *h = json_array_get(hosts, k);
                probe_entry(nc, h);
                /* An exact route host must route to its own route (rule 9). */
                const char *hv = json_string_value(h);
                if (hv && hv[0] != '*' && netcfg_route_for(nc, hv) != (int)i)
                    abort();
            }
        }
        if (netcfg_route_count(nc) != json_array_size(pr))
            abort();
        netcfg_free(nc);
    }
    struct netcfg *dflt = netcfg_compile(NULL);
    if (dflt && !netcfg_is_private(dflt, "10.0.0.1", 443))
        abort();
    netcfg_free(dflt);
    json_decref(doc);
    return 0;
}
