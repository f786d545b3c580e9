/*
 * tls_client: TLS from the egress to `protocol: https` upstream proxies
 * (OpenSSL libssl). The proxy's certificate must verify against the system's
 * trusted roots, or the operator's bundle (--proxy-ca-file), and name the
 * proxy's host (a DNS name, or the IP address when the host is a literal).
 *
 * One tls_client is shared by every thread; a connection (SSL) belongs to
 * one thread at a time. The socket may be blocking or not: calls on a
 * non-blocking socket answer TLS_AGAIN when they would block, and must then
 * be repeated with the same arguments once the socket is ready either way.
 */
#ifndef BD_PROXY_TLS_CLIENT_H
#define BD_PROXY_TLS_CLIENT_H

#include <openssl/ssl.h>
#include <sys/types.h>

#include "core/err.h"

struct tls_client;

/* ca_file: a PEM bundle trusted in addition to the system's roots, or
 * NULL/"". E_INVALID when the bundle cannot be loaded (the message names
 * the file and why). */
int tls_client_new(const char *ca_file, struct tls_client **out, struct err *e) WUR;
void tls_client_free(struct tls_client *t);

/* A client connection over the connected socket fd that will verify host
 * (sent as SNI when it is a name). With ca_pem (a PEM bundle that
 * tls_ca_bundle_check accepted, or NULL) the proxy's certificate must
 * verify against that bundle alone: a tenant's proxy with its own CA (a
 * MITM proxy) is trusted through its record, not through the system's roots.
 * NULL when OpenSSL cannot make one. */
SSL *tls_client_conn(struct tls_client *t, int fd, const char *host, const char *ca_pem);

/* Checks a PEM CA bundle given for a proxy (field: the field named in
 * errors): only CERTIFICATE blocks, at least one and at most
 * LIM_PROXY_CA_BUNDLE_CERTS, each a CA certificate, at most
 * LIM_PROXY_CA_BUNDLE_BYTES. 0, or E_INVALID with a field error in e. */
int tls_ca_bundle_check(const char *pem, const char *field, struct err *e);

enum { TLS_OK = 0, TLS_AGAIN = 1, TLS_FAILED = -1 };

/* Runs the handshake. TLS_OK, TLS_AGAIN, or TLS_FAILED with why (cap
 * bytes, e.g. "the upstream proxy's certificate did not verify: ..."). */
int tls_client_handshake(SSL *ssl, char *why, size_t cap);

/* SSL_read / SSL_write: > 0 bytes; 0 from tls_client_read at the end of the
 * stream (close_notify, or the peer's TCP close); -1 with errno EAGAIN when
 * it would block, EPIPE when the connection failed. */
ssize_t tls_client_read(SSL *ssl, void *buf, size_t n);
ssize_t tls_client_write(SSL *ssl, const void *buf, size_t n);

/* Sends close_notify (best effort, never blocks for the peer's). */
void tls_client_close_notify(SSL *ssl);

#endif
