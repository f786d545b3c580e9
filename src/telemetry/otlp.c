/*
 * otlp: the exporter thread, its bounded queue, and a minimal HTTP/1.1
 * client (one POST per batch, Connection: close) over plain TCP with poll
 * timeouts, so that a slow collector only ever delays this thread.
 */
#include "telemetry/otlp.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/xalloc.h"

/* Counters of one destination id (kept for the life of the process). */
struct dest_stats {
    char id[32];
    uint64_t exported, dropped, failed_attempts, queued;
    char last_error[200];
    struct dest_stats *next;
};

struct otlp_target {
    atomic_int refs;
    char id[32];
    char host[256];
    int port;
    char path[1024];
    char *headers;   /* "Name: value\r\n" lines */
    int bad;         /* endpoint did not parse: everything is dropped */
    size_t inflight; /* queued or being sent; under mu */
};

struct qitem {
    struct otlp_target *t;
    struct otlp_item it;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv, idle;
    struct qitem *q; /* ring of cap items */
    size_t cap, head, n;
    int running, stopping;
    pthread_t th;
    struct dest_stats *stats;
} X = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .cv = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER};

static struct dest_stats *stats_for(const char *id) /* under X.mu */
{
    for (struct dest_stats *s = X.stats; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    struct dest_stats *s = xcalloc(1, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", id);
    s->next = X.stats;
    X.stats = s;
    return s;
}

/* ---- endpoint ---- */

int otlp_parse_endpoint(const char *url, char *host, size_t host_cap, int *port, char *path,
                        size_t path_cap, struct err *e)
{
    if (strncmp(url, "http://", 7) != 0) {
        if (strncmp(url, "https://", 8) == 0)
            return err_field(e, "endpoint",
                             "https endpoints are not supported by this server (no TLS); use an "
                             "http:// collector endpoint");
        return err_field(e, "endpoint", "must be an http:// URL");
    }
    const char *h = url + 7, *p = h + strcspn(h, "/?#");
    if (strchr(url, '#'))
        return err_field(e, "endpoint", "must not carry a fragment");
    size_t hl = (size_t)(p - h);
    if (hl == 0 || memchr(h, '@', hl))
        return err_field(e, "endpoint", "must name a host (no user information)");
    const char *hs = h, *portp = NULL;
    size_t hn;
    if (*h == '[') {
        const char *rb = memchr(h, ']', hl);
        if (!rb)
            return err_field(e, "endpoint", "unterminated IPv6 address");
        hs = h + 1;
        hn = (size_t)(rb - hs);
        if (rb + 1 < p) {
            if (rb[1] != ':')
                return err_field(e, "endpoint", "malformed host");
            portp = rb + 2;
        }
    } else {
        const char *colon = memchr(h, ':', hl);
        hn = colon ? (size_t)(colon - h) : hl;
        portp = colon ? colon + 1 : NULL;
    }
    if (hn == 0 || hn >= host_cap)
        return err_field(e, "endpoint", "host is empty or too long");
    memcpy(host, hs, hn);
    host[hn] = '\0';
    *port = 80;
    if (portp) {
        long v = 0;
        const char *q = portp;
        if (q == p)
            return err_field(e, "endpoint", "empty port");
        for (; q < p; q++) {
            if (*q < '0' || *q > '9' || v > 65535)
                return err_field(e, "endpoint", "port must be a number from 1 to 65535");
            v = v * 10 + (*q - '0');
        }
        if (v < 1 || v > 65535)
            return err_field(e, "endpoint", "port must be a number from 1 to 65535");
        *port = (int)v;
    }
    const char *rest = *p ? p : "/";
    if (*rest == '?') {
        if (strlen(rest) + 2 > path_cap)
            return err_field(e, "endpoint", "path is too long");
        snprintf(path, path_cap, "/%s", rest);
        return 0;
    }
    if (strlen(rest) + 1 > path_cap)
        return err_field(e, "endpoint", "path is too long");
    for (const char *c = rest; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return err_field(e, "endpoint", "path must not contain spaces or control characters");
    snprintf(path, path_cap, "%s", rest);
    return 0;
}

/* ---- targets ---- */

struct otlp_target *otlp_target_new(const char *dest_id, const char *endpoint,
                                    const json_t *headers)
{
    struct otlp_target *t = xcalloc(1, sizeof *t);
    atomic_init(&t->refs, 1);
    snprintf(t->id, sizeof t->id, "%s", dest_id);
    struct err e;
    err_init(&e);
    if (otlp_parse_endpoint(endpoint, t->host, sizeof t->host, &t->port, t->path, sizeof t->path,
                            &e) != 0)
        t->bad = 1;
    size_t cap = 1, len = 0;
    t->headers = xcalloc(1, 1);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)headers, k, v)
    {
        if (!json_is_string(v) || strpbrk(k, "\r\n:") || strpbrk(json_string_value(v), "\r\n"))
            continue;
        char *line = xasprintf("%s: %s\r\n", k, json_string_value(v));
        size_t ll = strlen(line);
        if (len + ll + 1 > cap) {
            cap = (len + ll + 1) * 2;
            t->headers = xrealloc(t->headers, cap);
        }
        memcpy(t->headers + len, line, ll + 1);
        len += ll;
        xfree(line);
    }
    return t;
}

struct otlp_target *otlp_target_ref(struct otlp_target *t)
{
    atomic_fetch_add(&t->refs, 1);
    return t;
}

void otlp_target_unref(struct otlp_target *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    xfree(t->headers);
    xfree(t);
}

/* ---- the OTLP document ---- */

static json_t *attr_str(const char *k, const char *v)
{
    return json_pack("{s:s,s:{s:s}}", "key", k, "value", "stringValue", v);
}

char *otlp_logs_json(const struct otlp_item *items, size_t n)
{
    json_t *rl = json_array();
    for (size_t i = 0; i < n;) {
        /* Consecutive events of one session share a resource. */
        size_t j = i;
        json_t *recs = json_array();
        for (; j < n && strcmp(items[j].session_id, items[i].session_id) == 0; j++) {
            char ns[32];
            snprintf(ns, sizeof ns, "%lld000000", (long long)items[j].ts_ms);
            char seq[24];
            snprintf(seq, sizeof seq, "%llu", (unsigned long long)items[j].seq);
            json_t *attrs = json_array();
            json_array_append_new(attrs, attr_str("event.name", items[j].name));
            json_array_append_new(attrs, attr_str("browser.telemetry.category", items[j].category));
            json_array_append_new(attrs, json_pack("{s:s,s:{s:s}}", "key", "browser.telemetry.seq",
                                                   "value", "intValue", seq));
            json_array_append_new(recs, json_pack("{s:s,s:s,s:i,s:s,s:{s:s},s:o}", "timeUnixNano",
                                                  ns, "observedTimeUnixNano", ns, "severityNumber",
                                                  9, "severityText", "INFO", "body", "stringValue",
                                                  items[j].event, "attributes", attrs));
        }
        json_t *res = json_array();
        json_array_append_new(res, attr_str("service.name", "browserd"));
        json_array_append_new(res, attr_str("browser.session_id", items[i].session_id));
        json_array_append_new(rl, json_pack("{s:{s:o},s:[{s:{s:s},s:o}]}", "resource", "attributes",
                                            res, "scopeLogs", "scope", "name", "browserd.telemetry",
                                            "logRecords", recs));
        i = j;
    }
    json_t *doc = json_pack("{s:o}", "resourceLogs", rl);
    char *text = jsonx_dump(doc);
    json_decref(doc);
    return text;
}

/* ---- HTTP POST ---- */

static int wait_fd(int fd, short ev, int64_t deadline_us)
{
    for (;;) {
        int64_t left = deadline_us - clock_mono_us();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = ev};
        int r = poll(&p, 1, (int)((left + 999) / 1000));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* POSTs body; returns the HTTP status, or -1 with why in err_out. */
static int http_post(const struct otlp_target *t, const char *body, size_t len, char *why,
                     size_t why_cap)
{
    int64_t deadline = clock_mono_us() + (int64_t)OTLP_TIMEOUT_MS * 1000;
    char port[8];
    snprintf(port, sizeof port, "%d", t->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(t->host, port, &hints, &ai);
    if (g != 0) {
        snprintf(why, why_cap, "cannot resolve %.64s: %s", t->host, gai_strerror(g));
        return -1;
    }
    int fd = -1, status = -1;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 &&
            (errno != EINPROGRESS || wait_fd(fd, POLLOUT, deadline) != 0)) {
            close(fd);
            fd = -1;
            continue;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        snprintf(why, why_cap, "cannot connect to %.64s:%d", t->host, t->port);
        return -1;
    }
    int v6 = strchr(t->host, ':') != NULL;
    char *head =
        xasprintf("POST %s HTTP/1.1\r\nHost: %s%s%s:%d\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\nConnection: close\r\nUser-Agent: browserd\r\n"
                  "%s\r\n",
                  t->path, v6 ? "[" : "", t->host, v6 ? "]" : "", t->port, len, t->headers);
    const char *parts[2] = {head, body};
    size_t lens[2] = {strlen(head), len};
    for (int i = 0; i < 2 && fd >= 0; i++) {
        size_t off = 0;
        while (off < lens[i]) {
            ssize_t w = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
            if (w > 0) {
                off += (size_t)w;
                continue;
            }
            if (w < 0 && (errno == EAGAIN || errno == EINTR) && wait_fd(fd, POLLOUT, deadline) == 0)
                continue;
            snprintf(why, why_cap, "sending to %.64s:%d failed", t->host, t->port);
            close(fd);
            fd = -1;
            break;
        }
    }
    xfree(head);
    if (fd < 0)
        return -1;
    char resp[512];
    size_t got = 0;
    while (got < sizeof resp - 1 && !memchr(resp, '\n', got)) {
        ssize_t r = recv(fd, resp + got, sizeof resp - 1 - got, 0);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR) && wait_fd(fd, POLLIN, deadline) == 0)
            continue;
        break;
    }
    close(fd);
    resp[got] = '\0';
    int maj, min;
    if (sscanf(resp, "HTTP/%d.%d %d", &maj, &min, &status) != 3) {
        snprintf(why, why_cap, "no HTTP response from %.64s:%d", t->host, t->port);
        return -1;
    }
    if (status < 200 || status > 299)
        snprintf(why, why_cap, "collector answered HTTP %d", status);
    return status;
}

/* ---- the thread ---- */

static void item_free(struct qitem *q)
{
    xfree(q->it.event);
    otlp_target_unref(q->t);
}

/* Sends one batch (all of target t) with retries; returns 1 when delivered. */
static int send_batch(struct otlp_target *t, struct otlp_item *items, size_t n)
{
    char *body = otlp_logs_json(items, n);
    size_t len = strlen(body);
    int64_t give_up = clock_mono_us() + (int64_t)OTLP_RETRY_FOR_MS * 1000;
    int backoff = OTLP_BACKOFF_MIN_MS, ok = 0;
    for (;;) {
        char why[200] = "";
        int st = t->bad ? -1 : http_post(t, body, len, why, sizeof why);
        if (t->bad)
            snprintf(why, sizeof why, "endpoint is not a usable http:// URL");
        ok = st >= 200 && st <= 299;
        /* 4xx other than 408/429 will not get better on a retry. */
        int permanent = t->bad || (st >= 400 && st < 500 && st != 408 && st != 429);
        pthread_mutex_lock(&X.mu);
        struct dest_stats *s = stats_for(t->id);
        if (!ok) {
            s->failed_attempts++;
            snprintf(s->last_error, sizeof s->last_error, "%s", why);
        }
        int stopping = X.stopping;
        pthread_mutex_unlock(&X.mu);
        if (ok || permanent || stopping || clock_mono_us() > give_up)
            break;
        /* Sleep in short steps so that stop is prompt. */
        for (int slept = 0; slept < backoff; slept += 50) {
            usleep(50000);
            pthread_mutex_lock(&X.mu);
            stopping = X.stopping;
            pthread_mutex_unlock(&X.mu);
            if (stopping)
                break;
        }
        backoff = backoff * 2 > OTLP_BACKOFF_MAX_MS ? OTLP_BACKOFF_MAX_MS : backoff * 2;
    }
    if (!ok)
        log_warn("otlp: %zu events for destination %s dropped after retries", n, t->id);
    xfree(body);
    return ok;
}

static void *exporter(void *arg)
{
    (void)arg;
    struct qitem *batch = xcalloc(OTLP_BATCH, sizeof *batch);
    struct otlp_item *items = xcalloc(OTLP_BATCH, sizeof *items);
    pthread_mutex_lock(&X.mu);
    for (;;) {
        while (X.n == 0 && !X.stopping)
            pthread_cond_wait(&X.cv, &X.mu);
        if (X.n == 0 && X.stopping)
            break;
        /* Linger briefly so that a burst goes out as one batch. */
        if (X.n < OTLP_BATCH && !X.stopping) {
            struct timespec ts = clock_deadline(OTLP_LINGER_MS);
            pthread_cond_timedwait(&X.cv, &X.mu, &ts);
        }
        /* A batch: the leading run of items of the first item's target. */
        size_t n = 0;
        struct otlp_target *t = X.q[X.head].t;
        while (X.n > 0 && n < OTLP_BATCH && X.q[X.head].t == t) {
            batch[n++] = X.q[X.head];
            X.head = (X.head + 1) % X.cap;
            X.n--;
        }
        pthread_mutex_unlock(&X.mu);
        for (size_t i = 0; i < n; i++)
            items[i] = batch[i].it;
        int ok = send_batch(t, items, n);
        pthread_mutex_lock(&X.mu);
        struct dest_stats *s = stats_for(t->id);
        if (ok)
            s->exported += n;
        else
            s->dropped += n;
        s->queued -= n;
        t->inflight -= n;
        pthread_cond_broadcast(&X.idle);
        pthread_mutex_unlock(&X.mu);
        for (size_t i = 0; i < n; i++)
            item_free(&batch[i]);
        pthread_mutex_lock(&X.mu);
    }
    pthread_mutex_unlock(&X.mu);
    xfree(batch);
    xfree(items);
    return NULL;
}

int otlp_start(size_t queue_cap, struct err *e)
{
    clock_cond_init(&X.cv);
    clock_cond_init(&X.idle);
    pthread_mutex_lock(&X.mu);
    X.cap = queue_cap ? queue_cap : 1;
    X.q = xcalloc(X.cap, sizeof *X.q);
    X.head = X.n = 0;
    X.stopping = 0;
    X.running = 1;
    pthread_mutex_unlock(&X.mu);
    if (pthread_create(&X.th, NULL, exporter, NULL) != 0) {
        X.running = 0;
        xfree(X.q);
        X.q = NULL;
        return err_set(e, E_INTERNAL, "internal", "otlp: cannot start the exporter thread");
    }
    return 0;
}

void otlp_stop(void)
{
    pthread_mutex_lock(&X.mu);
    if (!X.running) {
        pthread_mutex_unlock(&X.mu);
        return;
    }
    X.stopping = 1;
    pthread_cond_broadcast(&X.cv);
    pthread_mutex_unlock(&X.mu);
    pthread_join(X.th, NULL);
    pthread_mutex_lock(&X.mu);
    X.running = 0;
    xfree(X.q);
    X.q = NULL;
    while (X.stats) {
        struct dest_stats *s = X.stats;
        X.stats = s->next;
        xfree(s);
    }
    pthread_mutex_unlock(&X.mu);
}

void otlp_enqueue(struct otlp_target *t, const char *session_id, uint64_t seq, int64_t ts_ms,
                  const char *category, const char *name, const char *event)
{
    pthread_mutex_lock(&X.mu);
    struct dest_stats *s = stats_for(t->id);
    if (!X.running || X.stopping || X.n >= X.cap) {
        s->dropped++;
        pthread_mutex_unlock(&X.mu);
        return;
    }
    struct qitem *q = &X.q[(X.head + X.n) % X.cap];
    memset(q, 0, sizeof *q);
    q->t = otlp_target_ref(t);
    snprintf(q->it.session_id, sizeof q->it.session_id, "%s", session_id);
    q->it.seq = seq;
    q->it.ts_ms = ts_ms;
    snprintf(q->it.category, sizeof q->it.category, "%s", category);
    snprintf(q->it.name, sizeof q->it.name, "%s", name);
    q->it.event = xstrdup(event);
    X.n++;
    s->queued++;
    t->inflight++;
    pthread_cond_signal(&X.cv);
    pthread_mutex_unlock(&X.mu);
}

int otlp_drain(struct otlp_target *t, int timeout_ms)
{
    struct timespec ts = clock_deadline(timeout_ms);
    pthread_mutex_lock(&X.mu);
    int rc = 0;
    while (t->inflight > 0 && rc == 0)
        rc = pthread_cond_timedwait(&X.idle, &X.mu, &ts) == 0 ? 0 : -1;
    pthread_mutex_unlock(&X.mu);
    return rc;
}

json_t *otlp_stats(const char *dest_id)
{
    pthread_mutex_lock(&X.mu);
    struct dest_stats *s = NULL;
    for (struct dest_stats *p = X.stats; p; p = p->next)
        if (strcmp(p->id, dest_id) == 0)
            s = p;
    json_t *o = json_pack("{s:I,s:I,s:I,s:I}", "exported", (json_int_t)(s ? s->exported : 0),
                          "dropped", (json_int_t)(s ? s->dropped : 0), "failed_attempts",
                          (json_int_t)(s ? s->failed_attempts : 0), "queued",
                          (json_int_t)(s ? s->queued : 0));
    if (s && s->last_error[0])
        json_object_set_new(o, "last_error", json_string(s->last_error));
    pthread_mutex_unlock(&X.mu);
    return o;
}
