#include "domain/viewport.h"

#include <limits.h>
#include <stddef.h>

#include "domain/fields.h"

/* Reads one dimension: an integer in [1, INT_MAX]. */
static int parse_dim(const char *path, const json_t *obj, const char *key, int required, int *out,
                     struct err *e)
{
    char p[FIELDS_PATH_MAX];
    const json_t *v = json_object_get(obj, key);
    *out = 0;
    fields_path(p, sizeof p, path, key);
    if (!v) {
        if (required)
            return err_field(e, p, "is required (an integer >= 1)");
        return 0;
    }
    if (!json_is_integer(v))
        return err_field(e, p, "must be an integer >= 1, not %s", fields_type_name(v));
    long long n = (long long)json_integer_value(v);
    if (n < 1)
        return err_field(e, p, "must be an integer >= 1 (got %lld)", n);
    if (n > INT_MAX)
        return err_field(e, p, "must be an integer >= 1 and at most %d (got %lld)", INT_MAX, n);
    *out = (int)n;
    return 0;
}

int viewport_parse(const char *path, const json_t *v, int allow_force, struct viewport *out,
                   int *force, struct err *e)
{
    static const char *const plain[] = {"width", "height", "refresh_rate", NULL};
    static const char *const with_force[] = {"width", "height", "refresh_rate", "force", NULL};
    out->width = out->height = out->refresh_rate = 0;
    if (force)
        *force = 0;
    if (!json_is_object(v))
        return err_field(e, path, "must be an object {width, height, refresh_rate?}, not %s",
                         fields_type_name(v));
    int rc = fields_check_known(path, v, allow_force ? with_force : plain, e);
    if (parse_dim(path, v, "width", 1, &out->width, e) < 0)
        rc = E_INVALID;
    if (parse_dim(path, v, "height", 1, &out->height, e) < 0)
        rc = E_INVALID;
    if (parse_dim(path, v, "refresh_rate", 0, &out->refresh_rate, e) < 0)
        rc = E_INVALID;
    const json_t *f = allow_force ? json_object_get(v, "force") : NULL;
    if (f) {
        char p[FIELDS_PATH_MAX];
        if (fields_check_bool(fields_path(p, sizeof p, path, "force"), f, e) < 0)
            rc = E_INVALID;
        else if (force)
            *force = json_is_true(f);
    }
    return rc;
}

void viewport_default(int gpu, struct viewport *out)
{
    out->width = VIEWPORT_DEFAULT_WIDTH;
    out->height = VIEWPORT_DEFAULT_HEIGHT;
    out->refresh_rate = viewport_refresh_for(out->width, out->height, gpu);
}

int viewport_refresh_for(int width, int height, int gpu)
{
    long long px = (width > 0 && height > 0) ? (long long)width * height : 0;
    if (gpu) {
        if (px <= 1920LL * 1200)
            return 60;
        return px <= 2560LL * 1600 ? 30 : 25;
    }
    if (px <= 1280LL * 800)
        return 60;
    return px <= 1920LL * 1200 ? 25 : 10;
}

void viewport_fill_rate(struct viewport *vp, int gpu)
{
    if (vp->refresh_rate <= 0)
        vp->refresh_rate = viewport_refresh_for(vp->width, vp->height, gpu);
}

struct preset {
    int w, h, hz;
};

/* "Known-good presets (width x height @ Hz)". */
static const struct preset known_good[] = {
    {2560, 1440, 10}, {1920, 1080, 25}, {1920, 1200, 25}, {1440, 900, 25}, {1280, 800, 60},
    {1024, 768, 60},  {1200, 800, 60},  {768, 1024, 60},  {390, 844, 60},
};

/* "For GPU images, recommended resolutions with refresh rates 60, 30, 25 or 10". */
static const struct preset gpu_sizes[] = {
    {800, 600, 0},  {960, 720, 0},  {1024, 576, 0},  {1024, 768, 0},
    {1152, 648, 0}, {1200, 800, 0}, {1280, 720, 0},  {1368, 768, 0},
    {1440, 900, 0}, {1600, 900, 0}, {1920, 1080, 0}, {1920, 1200, 0},
    {390, 844, 0},  {360, 250, 0},  {768, 1024, 0},  {800, 1600, 0},
};

int viewport_is_known_good(const struct viewport *vp, int gpu)
{
    struct viewport v = *vp;
    viewport_fill_rate(&v, gpu);
    if (gpu) {
        if (v.refresh_rate != 60 && v.refresh_rate != 30 && v.refresh_rate != 25 &&
            v.refresh_rate != 10)
            return 0;
        for (size_t i = 0; i < sizeof gpu_sizes / sizeof gpu_sizes[0]; i++)
            if (gpu_sizes[i].w == v.width && gpu_sizes[i].h == v.height)
                return 1;
        return 0;
    }
    for (size_t i = 0; i < sizeof known_good / sizeof known_good[0]; i++)
        if (known_good[i].w == v.width && known_good[i].h == v.height &&
            known_good[i].hz == v.refresh_rate)
            return 1;
    return 0;
}

json_t *viewport_to_json(const struct viewport *vp)
{
    json_t *o = json_object();
    json_object_set_new(o, "width", json_integer(vp->width));
    json_object_set_new(o, "height", json_integer(vp->height));
    if (vp->refresh_rate > 0)
        json_object_set_new(o, "refresh_rate", json_integer(vp->refresh_rate));
    return o;
}
