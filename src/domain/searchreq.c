#include "domain/searchreq.h"

#include <string.h>
#include <strings.h>

#include "core/jsonx.h"
#include "core/limits.h"
#include "domain/curlreq.h"

const char *const searchreq_outcome_names[] = {"success", "empty", "error", "timeout"};

static int domain_list(struct err *e, const json_t *body, const char *field, const json_t **out)
{
    json_t *v = json_object_get(body, field);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > 100)
        return err_field(e, field, "must be an array of at most 100 domain names");
    size_t i;
    json_t *d;
    json_array_foreach(v, i, d)
    {
        if (!json_is_string(d) || json_string_length(d) == 0 || json_string_length(d) > 253)
            return err_field(e, field, "[%zu] must be a domain name of 1 to 253 bytes", i);
    }
    *out = v;
    return 0;
}

static const char *opt_string(struct err *e, const json_t *body, const char *field, size_t max)
{
    json_t *v = json_object_get(body, field);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v) || json_string_length(v) > max) {
        (void)err_field(e, field, "must be a string of at most %zu bytes", max);
        return NULL;
    }
    return json_string_value(v);
}

static void parse_strategy(struct err *e, const json_t *body, const char *const *names,
                           size_t nnames, struct searchreq *sp)
{
    const json_t *st = json_object_get(body, "strategy");
    const char *type = "auto";
    const json_t *list = NULL, *fb = NULL;
    if (st && !json_is_null(st)) {
        if (!json_is_object(st)) {
            (void)err_field(e, "strategy", "must be an object {type, providers, fallback_on}");
            return;
        }
        json_t *t = json_object_get(st, "type");
        if (t && !json_is_string(t)) {
            (void)err_field(e, "strategy.type", "must be auto, pinned or fallback");
            return;
        }
        if (t)
            type = json_string_value(t);
        list = json_object_get(st, "providers");
        fb = json_object_get(st, "fallback_on");
    }
    if (strcmp(type, "auto") != 0 && strcmp(type, "pinned") != 0 && strcmp(type, "fallback") != 0) {
        (void)err_field(e, "strategy.type", "must be auto, pinned or fallback");
        return;
    }
    if (list && !json_is_null(list)) {
        if (!json_is_array(list) || json_array_size(list) == 0 ||
            json_array_size(list) > SEARCHREQ_PROVIDERS_MAX) {
            (void)err_field(e, "strategy.providers", "must be an array of 1 to %d provider names",
                            SEARCHREQ_PROVIDERS_MAX);
            return;
        }
        size_t i;
        json_t *n;
        json_array_foreach(list, i, n)
        {
            size_t k = nnames;
            for (size_t j = 0; json_is_string(n) && j < nnames && k == nnames; j++)
                if (strcmp(names[j], json_string_value(n)) == 0)
                    k = j;
            if (k == nnames) {
                (void)err_field(e, "strategy.providers",
                                "[%zu]: unknown provider (GET /search/providers lists them)", i);
                return;
            }
            sp->order[sp->norder++] = k;
        }
    } else if (strcmp(type, "auto") != 0) {
        (void)err_field(e, "strategy.providers", "is required with type %s", type);
        return;
    } else {
        for (size_t i = 0; i < nnames && i < SEARCHREQ_PROVIDERS_MAX; i++)
            sp->order[sp->norder++] = i;
    }
    if (strcmp(type, "pinned") == 0) {
        if (sp->norder != 1)
            (void)err_field(e, "strategy.providers", "pinned takes exactly one provider");
        sp->fallback_on = 0;
        return;
    }
    sp->fallback_on = 1u << SEARCH_ERROR | 1u << SEARCH_TIMEOUT;
    if (fb && !json_is_null(fb)) {
        if (!json_is_array(fb)) {
            (void)err_field(e, "strategy.fallback_on", "must be an array of error, timeout, empty");
            return;
        }
        sp->fallback_on = 0;
        size_t i;
        json_t *w;
        json_array_foreach(fb, i, w)
        {
            const char *s = json_is_string(w) ? json_string_value(w) : "";
            if (strcmp(s, "error") == 0)
                sp->fallback_on |= 1u << SEARCH_ERROR;
            else if (strcmp(s, "timeout") == 0)
                sp->fallback_on |= 1u << SEARCH_TIMEOUT;
            else if (strcmp(s, "empty") == 0)
                sp->fallback_on |= 1u << SEARCH_EMPTY;
            else
                (void)err_field(e, "strategy.fallback_on", "[%zu] must be error, timeout or empty",
                                i);
        }
    }
}

static void parse_content(struct err *e, const json_t *body, struct searchreq *sp)
{
    const json_t *c = json_object_get(body, "content");
    if (!c || json_is_null(c) || json_is_false(c))
        return;
    sp->content = 1;
    sp->max_chars = SEARCHREQ_CHARS_DEFAULT;
    sp->content_timeout_ms = SEARCHREQ_CONTENT_TIMEOUT_DEFAULT;
    if (json_is_true(c))
        c = NULL;
    else if (!json_is_object(c)) {
        (void)err_field(e, "content",
                        "must be true or an object {source, browser, format, max_chars}");
        return;
    }
    const char *source = c ? jsonx_str(c, "source") : NULL;
    if (c && json_object_get(c, "source") &&
        (!source ||
         (strcmp(source, "auto") && strcmp(source, "browser") && strcmp(source, "provider"))))
        (void)err_field(e, "content.source", "must be auto, provider or browser");
    if (source && strcmp(source, "provider") == 0)
        (void)err_field(e, "content.source",
                        "provider: no configured provider returns page content here; use browser");
    const char *format = c ? jsonx_str(c, "format") : NULL;
    if (c && json_object_get(c, "format") &&
        (!format || (strcmp(format, "markdown") && strcmp(format, "text"))))
        (void)err_field(e, "content.format", "must be markdown or text");
    sp->markdown = !format || strcmp(format, "markdown") == 0;
    json_t *mc = c ? json_object_get(c, "max_chars") : NULL;
    if (mc && (!json_is_integer(mc) || json_integer_value(mc) < 1 ||
               json_integer_value(mc) > LIM_SEARCH_CONTENT_CHARS))
        (void)err_field(e, "content.max_chars", "must be an integer from 1 to %d",
                        LIM_SEARCH_CONTENT_CHARS);
    else if (mc)
        sp->max_chars = (int)json_integer_value(mc);
    json_t *to = c ? json_object_get(c, "timeout_ms") : NULL;
    if (to && (!json_is_integer(to) || json_integer_value(to) < CURL_TIMEOUT_MIN_MS ||
               json_integer_value(to) > CURL_TIMEOUT_MAX_MS))
        (void)err_field(e, "content.timeout_ms", "must be an integer from %d to %d",
                        CURL_TIMEOUT_MIN_MS, CURL_TIMEOUT_MAX_MS);
    else if (to)
        sp->content_timeout_ms = (int)json_integer_value(to);
    json_t *age = c ? json_object_get(c, "max_age_hours") : NULL;
    if (age && !json_is_null(age) && !json_is_integer(age))
        (void)err_field(e, "content.max_age_hours", "must be an integer");
    const json_t *b = c ? json_object_get(c, "browser") : NULL;
    if (b && !json_is_null(b) && !json_is_object(b)) {
        (void)err_field(e, "content.browser", "must be an object {browser_id, mode}");
        return;
    }
    const char *mode = b ? jsonx_str(b, "mode") : NULL;
    if (b && json_object_get(b, "mode") &&
        (!mode || (strcmp(mode, "curl") && strcmp(mode, "render"))))
        (void)err_field(e, "content.browser.mode", "must be curl or render");
    sp->render = mode && strcmp(mode, "render") == 0;
    sp->browser_id = b ? jsonx_str(b, "browser_id") : NULL;
    if (!sp->browser_id || !*sp->browser_id)
        (void)err_field(e, "content.browser.browser_id",
                        "is required: this server fetches content through one of your browser "
                        "sessions (POST /browsers)");
}

int searchreq_parse(const json_t *body, const char *const *names, size_t nnames,
                    struct searchreq *sp, struct err *e)
{
    memset(sp, 0, sizeof *sp);
    json_t *q = json_object_get(body, "query");
    if (!json_is_string(q) || json_string_length(q) == 0 ||
        json_string_length(q) > LIM_SEARCH_QUERY_BYTES)
        (void)err_field(e, "query", "is required: a string of 1 to %d bytes",
                        LIM_SEARCH_QUERY_BYTES);
    else
        sp->query = json_string_value(q);
    sp->max_results = 10;
    json_t *mr = json_object_get(body, "max_results");
    if (mr && !json_is_null(mr) &&
        (!json_is_integer(mr) || json_integer_value(mr) < 1 || json_integer_value(mr) > 100))
        (void)err_field(e, "max_results", "must be an integer from 1 to 100");
    else if (mr && !json_is_null(mr))
        sp->max_results = (int)json_integer_value(mr);
    sp->country = opt_string(e, body, "country", 16);
    sp->language = opt_string(e, body, "language", 16);
    json_t *ss = json_object_get(body, "safe_search");
    if (ss && !json_is_null(ss)) {
        const char *s = json_is_string(ss) ? json_string_value(ss) : "";
        if (strcmp(s, "off") && strcmp(s, "moderate") && strcmp(s, "strict"))
            (void)err_field(e, "safe_search", "must be off, moderate or strict");
        else
            sp->safe_search = s;
    }
    (void)domain_list(e, body, "include_domains", &sp->include_domains);
    (void)domain_list(e, body, "exclude_domains", &sp->exclude_domains);
    json_t *to = json_object_get(body, "timeout_ms");
    if (to && !json_is_null(to) &&
        (!json_is_integer(to) || json_integer_value(to) < SEARCHREQ_TIMEOUT_MIN ||
         json_integer_value(to) > SEARCHREQ_TIMEOUT_MAX))
        (void)err_field(e, "timeout_ms", "must be an integer from %d to %d", SEARCHREQ_TIMEOUT_MIN,
                        SEARCHREQ_TIMEOUT_MAX);
    else if (to && !json_is_null(to))
        sp->timeout_ms = (int)json_integer_value(to);
    parse_strategy(e, body, names, nnames, sp);
    parse_content(e, body, sp);
    return err_has_fields(e) ? E_INVALID : 0;
}

/* 1 when url's host is domain or under it. */
static int host_in(const char *url, const char *domain)
{
    const char *h = strstr(url, "://");
    if (!h)
        return 0;
    h += 3;
    size_t hl = strcspn(h, "/?#:");
    size_t dl = strlen(domain);
    if (hl < dl || strncasecmp(h + hl - dl, domain, dl) != 0)
        return 0;
    return hl == dl || h[hl - dl - 1] == '.';
}

int searchreq_kept(const struct searchreq *sp, const char *url)
{
    size_t i;
    json_t *d;
    if (sp->exclude_domains) {
        json_array_foreach(sp->exclude_domains, i, d)
        {
            if (host_in(url, json_string_value(d)))
                return 0;
        }
    }
    if (!sp->include_domains)
        return 1;
    json_array_foreach(sp->include_domains, i, d)
    {
        if (host_in(url, json_string_value(d)))
            return 1;
    }
    return 0;
}
