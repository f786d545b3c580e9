/*
 * Every size limit applied to untrusted bytes, in one place (curl's
 * curlx_dyn_init(buf, toobig) habit: a buffer knows its maximum at birth).
 */
#ifndef BD_CORE_LIMITS_H
#define BD_CORE_LIMITS_H

/* Request body cap, checked before parsing. The interface document allows a
 * 5 MiB serialized chrome_policy, so the envelope gets 1 MiB on top. */
#define LIM_BODY_BYTES (6u * 1024u * 1024u)
/* Request body cap of routes that take file uploads (HTTP_ROUTE_UPLOAD):
 * fs uploads and extension zips (the hosted client's own cap is 50 MiB). */
#define LIM_UPLOAD_BYTES (64u * 1024u * 1024u)
/* Memory libmicrohttpd may use per connection for the request line, headers
 * and read buffer. It zeroes this pool between keep-alive requests, so it is
 * kept small: a larger pool costs a visible memset on every request. */
#define LIM_HEADER_BYTES (16u * 1024u)
/* Deepest JSON nesting accepted in a request body. */
#define LIM_JSON_DEPTH 64
/* Longest bearer token or signed URL token accepted. */
#define LIM_TOKEN_BYTES 4096u
/* Longest URL path accepted by the router. */
#define LIM_PATH_BYTES 2048u
/* Most path parameters in one route. */
#define LIM_PATH_PARAMS 4
/* WebSocket relay: largest reassembled message and most fragments per message. */
#define LIM_WS_MESSAGE_BYTES (64u * 1024u * 1024u)
#define LIM_WS_FRAGMENTS     4096u
/* Error details kept per response; further problems are counted, not listed. */
#define LIM_ERR_DETAILS 32
/* Egress proxy: a browser's request head, or an upstream proxy's response
 * head (CONNECT reply), read before anything is relayed. */
#define LIM_EGRESS_HEAD_BYTES (16u * 1024u)
/* WebDriver BiDi: the first client message (session.new), read whole by the
 * server before the relay starts. */
#define LIM_BIDI_FIRST_MESSAGE_BYTES (1u << 20)
/* chromedriver's HTTP replies (status, new session) read by the server. */
#define LIM_DRIVER_REPLY_BYTES (1u << 20)
/* A session's own files (/tmp and /home inside its sandbox): a tmpfs of this
 * size, so that one session cannot fill the host's disk. */
#define LIM_SESSION_DISK_BYTES (1024LL * 1024 * 1024)
/* Pagination. */
#define LIM_LIST_DEFAULT 20
#define LIM_LIST_MAX     100

#endif
