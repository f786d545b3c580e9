#include "proxy/tls_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "core/limits.h"
#include "core/xalloc.h"

struct tls_client {
    SSL_CTX *ctx;
};

/* The reason of the oldest queued OpenSSL error (the queue is cleared). */
static const char *ossl_reason(void)
{
    unsigned long code = ERR_get_error();
    const char *r = code ? ERR_reason_error_string(code) : NULL;
    ERR_clear_error();
    return r ? r : "unknown error";
}

int tls_client_new(const char *ca_file, struct tls_client **out, struct err *e)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return err_set(e, E_INTERNAL, "internal", "TLS: %s", ossl_reason());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* A proxy that closes TCP without close_notify ends the stream; the
     * tunnelled protocol has its own framing. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_set_default_verify_paths(ctx) != 1)
        ERR_clear_error(); /* no system bundle: only --proxy-ca-file is trusted */
    if (ca_file && *ca_file && SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
        const char *why = ossl_reason();
        SSL_CTX_free(ctx);
        return err_set(e, E_INVALID, "bad_request", "--proxy-ca-file %s: cannot load: %s", ca_file,
                       why);
    }
    struct tls_client *t = xcalloc(1, sizeof *t);
    t->ctx = ctx;
    *out = t;
    return 0;
}

void tls_client_free(struct tls_client *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    xfree(t);
}

/* The certificates of a PEM bundle, in order; *n of them (cap at most).
 * Returns -1 when a block is not a certificate or does not parse, or the
 * bundle holds more than cap. */
static int pem_certs(const char *pem, X509 **certs, int cap, int *n)
{
    *n = 0;
    BIO *bio = BIO_new_mem_buf(pem, (int)strlen(pem));
    if (!bio)
        return -1;
    int rc = 0;
    for (;;) {
        char *name = NULL, *header = NULL;
        unsigned char *data = NULL;
        long len = 0;
        if (PEM_read_bio(bio, &name, &header, &data, &len) != 1) {
            /* The end of the bundle, or bytes that are not a PEM block. */
            unsigned long code = ERR_peek_last_error();
            if (ERR_GET_REASON(code) != PEM_R_NO_START_LINE)
                rc = -1;
            break;
        }
        const unsigned char *p = data;
        X509 *x = strcmp(name, PEM_STRING_X509) == 0 || strcmp(name, PEM_STRING_X509_OLD) == 0
                      ? d2i_X509(NULL, &p, len)
                      : NULL;
        OPENSSL_free(name);
        OPENSSL_free(header);
        OPENSSL_free(data);
        if (!x || *n == cap) {
            X509_free(x);
            rc = -1;
            break;
        }
        certs[(*n)++] = x;
    }
    ERR_clear_error();
    BIO_free(bio);
    if (rc != 0) {
        while (*n > 0)
            X509_free(certs[--*n]);
    }
    return rc;
}

int tls_ca_bundle_check(const char *pem, const char *field, struct err *e)
{
    if (strlen(pem) > LIM_PROXY_CA_BUNDLE_BYTES)
        return err_field(e, field, "must be at most %u bytes of PEM", LIM_PROXY_CA_BUNDLE_BYTES);
    X509 *certs[LIM_PROXY_CA_BUNDLE_CERTS];
    int n;
    if (pem_certs(pem, certs, LIM_PROXY_CA_BUNDLE_CERTS, &n) != 0)
        return err_field(e, field,
                         "must be PEM CERTIFICATE blocks only (at most %d), each one a valid "
                         "X.509 certificate",
                         LIM_PROXY_CA_BUNDLE_CERTS);
    int rc = n == 0 ? err_field(e, field, "holds no PEM certificate") : 0;
    for (int i = 0; i < n; i++) {
        if (rc == 0 && X509_check_ca(certs[i]) == 0)
            rc = err_field(e, field, "certificate %d is not a CA certificate", i + 1);
        X509_free(certs[i]);
    }
    return rc;
}

/* A store holding exactly the bundle's certificates, or NULL. */
static X509_STORE *bundle_store(const char *pem)
{
    X509 *certs[LIM_PROXY_CA_BUNDLE_CERTS];
    int n;
    if (pem_certs(pem, certs, LIM_PROXY_CA_BUNDLE_CERTS, &n) != 0 || n == 0)
        return NULL;
    X509_STORE *st = X509_STORE_new();
    int ok = st != NULL;
    for (int i = 0; i < n; i++) {
        ok = ok && X509_STORE_add_cert(st, certs[i]) == 1;
        X509_free(certs[i]);
    }
    if (!ok) {
        X509_STORE_free(st);
        return NULL;
    }
    return st;
}

SSL *tls_client_conn(struct tls_client *t, int fd, const char *host, const char *ca_pem)
{
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl)
        goto fail;
    if (ca_pem && *ca_pem) {
        X509_STORE *st = bundle_store(ca_pem);
        int ok = st && SSL_set1_verify_cert_store(ssl, st) == 1;
        X509_STORE_free(st); /* the connection holds its own reference */
        if (!ok)
            goto fail;
    }
    unsigned char ip[16];
    int literal = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    int ok = SSL_set_fd(ssl, fd) == 1;
    if (literal) {
        ok = ok && X509_VERIFY_PARAM_set1_ip_asc(vp, host) == 1;
    } else {
        X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        ok = ok && SSL_set1_host(ssl, host) == 1 && SSL_set_tlsext_host_name(ssl, host) == 1;
    }
    if (ok)
        return ssl;
fail:
    ERR_clear_error();
    SSL_free(ssl);
    return NULL;
}

int tls_client_handshake(SSL *ssl, char *why, size_t cap)
{
    ERR_clear_error();
    int r = SSL_connect(ssl);
    if (r == 1)
        return TLS_OK;
    int err = SSL_get_error(ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return TLS_AGAIN;
    long vr = SSL_get_verify_result(ssl);
    if (vr != X509_V_OK)
        snprintf(why, cap, "the upstream proxy's certificate did not verify: %s",
                 X509_verify_cert_error_string(vr));
    else if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN)
        snprintf(why, cap, "the upstream proxy closed the connection during the TLS handshake");
    else
        snprintf(why, cap, "TLS handshake with the upstream proxy failed: %s", ossl_reason());
    ERR_clear_error();
    return TLS_FAILED;
}

/* Maps a failed SSL_read/SSL_write to -1 with errno; 0 for the end. */
static ssize_t io_result(SSL *ssl, int r)
{
    int err = SSL_get_error(ssl, r);
    ERR_clear_error();
    if (err == SSL_ERROR_ZERO_RETURN)
        return 0;
    errno = err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ? EAGAIN : EPIPE;
    return -1;
}

ssize_t tls_client_read(SSL *ssl, void *buf, size_t n)
{
    ERR_clear_error();
    int r = SSL_read(ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    return r > 0 ? r : io_result(ssl, r);
}

ssize_t tls_client_write(SSL *ssl, const void *buf, size_t n)
{
    if (n == 0)
        return 0;
    ERR_clear_error();
    int r = SSL_write(ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (r > 0)
        return r;
    ssize_t k = io_result(ssl, r);
    if (k == 0) { /* the peer's close_notify: nothing more can be written */
        errno = EPIPE;
        k = -1;
    }
    return k;
}

void tls_client_close_notify(SSL *ssl)
{
    ERR_clear_error();
    (void)SSL_shutdown(ssl);
    ERR_clear_error();
}
