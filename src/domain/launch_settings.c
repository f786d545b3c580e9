#include "domain/launch_settings.h"

#include <limits.h>
#include <string.h>

#include "domain/session_rules.h"

static int bool_of(const json_t *doc, const char *key, int dflt)
{
    const json_t *v = json_object_get(doc, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* An integer in [min, max] at key, else 0 with *out untouched. */
static int int_of(const json_t *obj, const char *key, long long min, long long max, long long *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return 0;
    *out = (long long)json_integer_value(v);
    return 1;
}

/* The stored size when both sides are usable, else the image's; the stored
 * rate when usable, else the one chosen for the size. */
static void viewport_of(const json_t *vp, int gpu, struct viewport *out)
{
    long long w, h, hz;
    if (int_of(vp, "width", 1, INT_MAX, &w) && int_of(vp, "height", 1, INT_MAX, &h)) {
        out->width = (int)w;
        out->height = (int)h;
    } else {
        out->width = VIEWPORT_DEFAULT_WIDTH;
        out->height = VIEWPORT_DEFAULT_HEIGHT;
    }
    out->refresh_rate = int_of(vp, "refresh_rate", 1, INT_MAX, &hz) ? (int)hz : 0;
    viewport_fill_rate(out, gpu);
}

long long launch_memory_bytes(const char *memory)
{
    long long gib = 0;
    const char *m = memory;
    for (; *m >= '0' && *m <= '9'; m++) {
        gib = gib * 10 + (*m - '0');
        if (gib > (LLONG_MAX >> 30))
            return 0;
    }
    return m == memory ? 0 : gib << 30;
}

void launch_settings_from_json(const json_t *doc, struct launch_settings *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(doc))
        doc = NULL;
    out->headless = bool_of(doc, "headless", LAUNCH_HEADLESS_DEFAULT);
    out->stealth = bool_of(doc, "stealth", 0);
    out->kiosk_mode = bool_of(doc, "kiosk_mode", 0);
    out->gpu = bool_of(doc, "gpu", 0);
    viewport_of(json_object_get(doc, "viewport"), out->gpu, &out->viewport);
    const char *mem = json_string_value(json_object_get(doc, "memory"));
    out->memory_bytes = mem ? launch_memory_bytes(mem) : 0;
    if (out->memory_bytes <= 0)
        out->memory_bytes = launch_memory_bytes(SESSRULES_MEMORY_DEFAULT);
    out->timeout_seconds = SESSRULES_TIMEOUT_DEFAULT;
    (void)int_of(doc, "timeout_seconds", SESSRULES_TIMEOUT_FLOOR, SESSRULES_TIMEOUT_MAX,
                 &out->timeout_seconds);
    const json_t *pol = json_object_get(doc, "chrome_policy");
    out->chrome_policy = json_is_object(pol) && json_object_size(pol) ? pol : NULL;
    const json_t *net = json_object_get(doc, "network");
    out->network = json_is_object(net) ? net : NULL;
}

void launch_settings_from_text(const char *data, struct launch_settings *out)
{
    json_t *doc = data ? json_loads(data, 0, NULL) : NULL;
    launch_settings_from_json(doc, out);
    out->chrome_policy = NULL;
    out->network = NULL;
    json_decref(doc);
}
