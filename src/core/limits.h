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
/* Request body cap of the JSON routes whose document allows more than
 * LIM_BODY_BYTES (HTTP_ROUTE_LARGE_BODY): the Browser REPL's body is at most
 * 8 MiB (KERNEL_API_NEWER.md 1.4), and holds WebMCP custom tools' source of
 * up to 8,000,000 bytes. Like every body it is held inside its
 * tenant's share of LIM_HTTP_BODY_BUDGET_BYTES (LIM_HTTP_BODY_TENANT_BYTES). */
#define LIM_LARGE_BODY_BYTES (8u * 1024u * 1024u)
/* Bytes of a streamed request body (HTTP_ROUTE_STREAM) held between the
 * connection and its handler: past it the connection stops reading until
 * the handler took them. */
#define LIM_HTTP_STREAM_BYTES (256u * 1024u)
/* A handler waiting for a streamed body's next bytes (req_defer_body) looks
 * at its client this often, to notice one that closed mid-body. */
#define LIM_HTTP_STREAM_CHECK_MS 1000
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
/* Largest CDP command the relay parses whole to refuse it (its id, sessionId
 * and params; relay.h's refuse hook, Extensions.loadUnpacked): a parse tree
 * is many times its text, and a client may send LIM_WS_MESSAGE_BYTES. A
 * larger command that would be refused is dropped without an answer. */
#define LIM_RELAY_REFUSE_PARSE_BYTES (64u * 1024u)
/* Bytes of client WebSocket messages the CDP and BiDi relay holds while it
 * reassembles them (each data frame is charged its announced length when it
 * starts, given back when its message is relayed or the connection ends):
 * on the whole server, per organization and per session. Without them one
 * organization opening connections and sending 60 MiB of a 64 MiB message on
 * each, never its last byte, grew the server by 60 MiB per connection
 * (256 connections per client address). Past a share the connection is
 * closed with 1009 (red team pass 45). */
#define LIM_RELAY_MSG_BUDGET_BYTES  ((size_t)512 * 1024 * 1024)
#define LIM_RELAY_MSG_ORG_BYTES     ((size_t)160 * 1024 * 1024)
#define LIM_RELAY_MSG_SESSION_BYTES ((size_t)128 * 1024 * 1024)
/* CDP WebSockets relayed at once (each two sockets, the browser's DevTools
 * connection and its share of the relay's memory above): on the server, per
 * organization and per session; past a share the upgrade is a 429 with
 * Retry-After. Before, only the HTTP front's per-address limit bounded them,
 * which a tenant with many addresses (an IPv6 prefix) passes (red team pass
 * 45). */
#define LIM_RELAY_CONNS             4096
#define LIM_RELAY_CONNS_PER_ORG     256
#define LIM_RELAY_CONNS_PER_SESSION 64
/* WebDriver BiDi WebSockets relayed at once (each two sockets, a connection to
 * the session's ChromeDriver and its share of the relay's memory above): on the
 * server, per organization and per session, counted apart from the CDP ones;
 * past a share the upgrade is a 429 with Retry-After. A client needs one per
 * session; before, only the HTTP front's per-address limit bounded them (red
 * team pass 45b). */
#define LIM_BIDI_CONNS             1024
#define LIM_BIDI_CONNS_PER_ORG     64
#define LIM_BIDI_CONNS_PER_SESSION 16
/* Error details kept per response; further problems are counted, not listed. */
#define LIM_ERR_DETAILS 32
/* Egress proxy: a browser's request head, or an upstream proxy's response
 * head (CONNECT reply), read before anything is relayed. */
#define LIM_EGRESS_HEAD_BYTES (16u * 1024u)
/* The egress's in-kernel splice (proxy/ksplice, docs/egress-proxy.md): sockets its maps hold
 * (two per tunnel; the maps' memory is charged to the server's memory cgroup), and the tunnels
 * one session and one organization may have there. Beyond a share, tunnels are relayed in user
 * space: still carried, with the relay's cost. */
#define LIM_EGRESS_KERNEL_SOCKETS 65536
#define LIM_EGRESS_KERNEL_SESSION 1024
#define LIM_EGRESS_KERNEL_ORG     8192
/* The send buffer asked for on both sockets of a tunnel spliced in the kernel (the kernel
 * doubles it and caps it with net.core.wmem_max): what the kernel may hold for a slow reader,
 * beside the source's receive buffer, as TCP does for any connection. */
#define LIM_EGRESS_KERNEL_SNDBUF (4 << 20)
/* A custom proxy's ca_bundle (PEM, issue 33.5): its size and how many
 * certificates it may hold. It is kept in the proxy's row and parsed for
 * every TLS connection to the proxy, so it stays small (a CA chain is a few
 * KiB; 64 KiB holds dozens). */
#define LIM_PROXY_CA_BUNDLE_BYTES (64u * 1024u)
#define LIM_PROXY_CA_BUNDLE_CERTS 32
/* DevTools discovery (api/cdp_discovery.c): the browser's /json/protocol
 * answer browserd passes on (Chromium 14x: 1.6 MB), and the URL of
 * /json/new?URL. */
#define LIM_CDP_PROTOCOL_BYTES (4u << 20)
#define LIM_CDP_NEW_URL_BYTES  8192u
/* /json/protocol fetches in flight, each holding up to twice
 * LIM_CDP_PROTOCOL_BYTES (the browser's answer and the client's copy): the
 * server's, each organization's and each session's share (429 beyond). A
 * session may start four clients at once (each fetches the descriptor). */
#define LIM_CDP_PROTOCOL_FETCHES             8
#define LIM_CDP_PROTOCOL_FETCHES_PER_ORG     4
#define LIM_CDP_PROTOCOL_FETCHES_PER_SESSION 4
/* WebDriver BiDi: the first client message (session.new), read whole by the
 * server before the relay starts. */
#define LIM_BIDI_FIRST_MESSAGE_BYTES (1u << 20)
/* WebDriver BiDi: session.status probes before the session.new answered by
 * the server's opening exchange (Puppeteer sends one); later ones go to the
 * driver. */
#define LIM_BIDI_OPENING_STATUS 4
/* chromedriver's HTTP replies (status, new session) read by the server. */
#define LIM_DRIVER_REPLY_BYTES (1u << 20)
/* Classic WebDriver (api/wdclassic.c): a command's body relayed to a
 * session's chromedriver, and the driver's answer relayed back (a full-page
 * screenshot in base64 is several MiB). */
#define LIM_WD_COMMAND_BYTES (4u << 20)
#define LIM_WD_REPLY_BYTES   (32u << 20)
/* The longest a relayed WebDriver command may take (an element wait, an
 * async script, a page load under the session's own timeouts). */
#define LIM_WD_COMMAND_MS (120 * 1000)
/* Classic WebDriver commands relayed at once (core/share.h): on the server,
 * per organization and per session. Each holds a blocking thread for up to
 * LIM_WD_COMMAND_MS and up to twice LIM_WD_REPLY_BYTES of answer; a
 * session's chromedriver runs its commands one at a time, so more than two
 * of one session only wait there, each holding its thread. Past a share:
 * 429 with Retry-After. */
#define LIM_WD_INFLIGHT             32
#define LIM_WD_INFLIGHT_PER_ORG     16
#define LIM_WD_INFLIGHT_PER_SESSION 2
#define LIM_WD_RETRY_AFTER_S        1
/* A session's own files (/tmp and /home inside its sandbox): a tmpfs of this
 * size, so that one session cannot fill the host's disk. */
#define LIM_SESSION_DISK_BYTES (1024LL * 1024 * 1024)
/* A sandboxed session's Chromium profile (its user-data folder): a tmpfs of
 * this size (sandbox_home_mount). Chromium sizes its HTTP cache from the free
 * space it sees (80 MB on 512 MiB), and every page written counts against the
 * session's memory limit. */
#define LIM_SESSION_PROFILE_BYTES (512LL * 1024 * 1024)
/* Origins a released pool browser's tabs may have shown for its cleaning to
 * be verified (runtime/pool_clean.c): each is cleared and read back, a
 * navigation and a few DevTools calls apiece. A lease that showed more is
 * not cleaned but replaced with a new browser. */
#define LIM_POOL_CLEAN_ORIGINS 64
/* multipart/form-data uploads: most parts per body, and most header bytes of
 * one part (its Content-Disposition and Content-Type lines). */
#define LIM_MULTIPART_PARTS        256
#define LIM_MULTIPART_HEADER_BYTES (8u * 1024u)
/* Blanks of transport padding after a delimiter's boundary (RFC 2046 sets
 * no bound; a line with more is not a delimiter), and the bytes a streamed
 * parse (multipart_stream_*) holds at once: a header block, or a part's
 * data less its last bytes, which may begin a delimiter. */
#define LIM_MULTIPART_PADDING 64
#define LIM_MULTIPART_WINDOW  (64u * 1024u)
/* Every share of a server-wide cap (core/share.h) keeps its last
 * total / LIM_SHARE_RESERVE_DIV units (at least one) for organizations that
 * hold none of it: organizations already holding units, however many, can
 * fill it only up to total minus that reserve, so a newcomer is never refused
 * because others together hold everything. An eighth: a few newcomers at
 * once get in while the rest of the cap stays usable. */
#define LIM_SHARE_RESERVE_DIV 8
/* browsers.fs (docs/fs.md): entries one list_files answers; entries and
 * unpacked bytes of one upload_zip (the session's 1 GiB tmpfs stops the rest);
 * download_dir_zip streams being zipped at once on this server (a thread
 * each); watches per session and folders one recursive watch may cover. */
#define LIM_FS_LIST_ENTRIES       100000u
#define LIM_FS_ZIP_ENTRIES        10000u
#define LIM_FS_ZIP_UNPACKED_BYTES (512LL * 1024 * 1024)
#define LIM_FS_ZIP_STREAMS        16
/* ... and each organization's and each session's share of those streams
 * (core/share.h): one tenant never holds all of them, and the last
 * SHARE_RESERVE(16) = 2 are kept for organizations holding none. A stream whose client
 * reads nothing for LIM_FS_ZIP_IDLE_S seconds is ended and its slot freed. */
#define LIM_FS_ZIP_STREAMS_PER_ORG     4
#define LIM_FS_ZIP_STREAMS_PER_SESSION 2
#define LIM_FS_ZIP_IDLE_S              20
#define LIM_FS_WATCHES                 16
#define LIM_FS_WATCH_DIRS              1024

/* Files one downloads listing names (GET fs/downloads), and the sha256s of
 * downloaded files remembered server-wide so that listing again does not
 * read them again (a cache: a tenant filling it only makes the next listing
 * hash again, at most its session's 1 GiB of files). */
#define LIM_FS_DOWNLOADS_LISTED 1000u
#define LIM_FS_DOWNLOAD_HASHES  256u

/* Handshakes in progress on the session relay (proxy/selfrelay: a browser
 * opening its own session's CDP relay), in all, per organization and per
 * session: one tenant never holds every slot. */
#define LIM_SELF_RELAY_PENDING         64
#define LIM_SELF_RELAY_PENDING_ORG     16
#define LIM_SELF_RELAY_PENDING_SESSION 4

/* Live view viewers connected at once (api/liveview), in all, per
 * organization and per session: each holds a thread, an X connection to the
 * session's display and a copy of its screen (8 MiB at 1920x1080). */
#define LIM_LIVE_VIEWERS         256
#define LIM_LIVE_VIEWERS_ORG     32
#define LIM_LIVE_VIEWERS_SESSION 8
/* The screens those viewers hold (a screen is width x height x 4 bytes:
 * the kept copy of the last picture; its PNG and the WebSocket's copy of it
 * are transient), in all, per organization and per session. The viewport has
 * no upper bound, so the viewers' count alone let one session hold 8 copies
 * of any screen (eight viewers of a 4096x4096 session grew the server by 1.5
 * GiB). Sized so that the counts above still fit at 1920x1080 (8.3 MB). */
#define LIM_LIVE_VIEW_BYTES         (2048LL * 1024 * 1024)
#define LIM_LIVE_VIEW_BYTES_ORG     (256LL * 1024 * 1024)
#define LIM_LIVE_VIEW_BYTES_SESSION (64LL * 1024 * 1024)
/* Browser extension archives (runtime/extpack): the zip as uploaded (the
 * hosted client's own cap), its entries, its unpacked bytes (they land in a
 * session's 1 GiB files), its manifest.json, and extensions per session or
 * per load. */
#define LIM_EXT_ZIP_BYTES      (50u * 1024u * 1024u)
#define LIM_EXT_ENTRIES        5000u
#define LIM_EXT_UNPACKED_BYTES (200ull * 1024u * 1024u)
#define LIM_EXT_MANIFEST_BYTES (1u << 20)
#define LIM_EXT_PER_SESSION    20
/* Processes of a session (browsers.process.*, playwright.execute): exec's
 * default and largest timeout; the output exec keeps per stream (the rest is
 * read and dropped, the response says *_truncated); the output a spawned
 * process keeps for late stream subscribers; processes running at once per
 * session; how long an exited process still answers status and stream. */
#define LIM_PROC_EXEC_TIMEOUT_S     60
#define LIM_PROC_EXEC_TIMEOUT_MAX_S 600
#define LIM_PROC_OUTPUT_BYTES       (16u * 1024u * 1024u)
#define LIM_PROC_REPLAY_BYTES       (1u * 1024u * 1024u)
#define LIM_PROC_PER_SESSION        32
#define LIM_PROC_KEEP_EXITED_S      60
/* stdin calls in flight on one process (each writes what the pipe takes at
 * once and never waits for the reader): past it, 429. */
#define LIM_PROC_STDIN_CALLS 4
/* All exec output the server holds at once, every session together: past
 * it, output is dropped (and said truncated) rather than held. */
#define LIM_PROC_OUTPUT_TOTAL_BYTES (256u * 1024u * 1024u)
/* playwright.execute: timeout_sec bounds and the runner's stdout/stderr kept. */
#define LIM_PW_TIMEOUT_MAX_S 300
#define LIM_PW_OUTPUT_BYTES  (1u * 1024u * 1024u)
/* The Browser REPL (docs/repl.md): timeout_sec's default and maximum; the
 * text of one call's answer (beyond it content_truncated); one frame from
 * the REPL process (a full-HD screenshot's base64 fits); the images of one
 * call and all their bytes together (beyond them dropped, content_truncated).
 * A call holds at most about FRAME + IMAGE_BYTES_ALL, on one of the
 * LIM_HTTP_BLOCKING_THREADS. */
#define LIM_REPL_TIMEOUT_S       60
#define LIM_REPL_TIMEOUT_MAX_S   300
#define LIM_REPL_TEXT_BYTES      (256u * 1024u)
#define LIM_REPL_FRAME_BYTES     (8u * 1024u * 1024u)
#define LIM_REPL_IMAGES          16
#define LIM_REPL_IMAGE_BYTES_ALL (16u * 1024u * 1024u)
/* REPL calls running at once for one organization (each holds a blocking
 * thread up to its timeout_sec): past it, 429. */
#define LIM_REPL_RUNNING_PER_ORG 8
/* WebMCP (docs/webmcp.md): an invocation's input (as JSON) and the output
 * a page's tool may answer (past it: status error); an invocation's
 * timeout_sec (default, most); the time a tools list may take; a tool_ref's
 * length; custom tools per session, namespaces per session and one
 * namespace's source (the document's 8,000,000 bytes; held once per
 * namespace, however many tools it defines); calls running at once per
 * session and per organization (each holds a blocking thread and one Node
 * process in the session's sandbox): past them, 429. The output cap stays
 * under LIM_PW_OUTPUT_BYTES, which bounds the runner's whole answer record
 * (runtime-js/webmcp.js says it too). */
#define LIM_WEBMCP_INPUT_BYTES    (1u * 1024u * 1024u)
#define LIM_WEBMCP_OUTPUT_BYTES   (960u * 1024u)
#define LIM_WEBMCP_TIMEOUT_S      30
#define LIM_WEBMCP_TIMEOUT_MAX_S  300
#define LIM_WEBMCP_LIST_TIMEOUT_S 30
#define LIM_WEBMCP_REF_BYTES      4096
#define LIM_WEBMCP_CUSTOM_TOOLS   64
#define LIM_WEBMCP_NAMESPACES     8
/* A custom tools namespace's length: the hosted service's CLI and MCP
 * server accept 1..128 of [A-Za-z0-9_.-]. */
#define LIM_WEBMCP_NAMESPACE_LEN       128
#define LIM_WEBMCP_CUSTOM_SOURCE_BYTES 8000000u
#define LIM_WEBMCP_RUNNING_PER_SESSION 2
#define LIM_WEBMCP_RUNNING_PER_ORG     8
/* Custom tool sources the server holds in memory (docs/webmcp.md, "Tenant
 * fairness: WebMCP custom tool sources" in docs/sandbox.md): at most this
 * many bytes for one session (two full-size namespaces), for one
 * organization (four), and for the whole server (a fifth of it per
 * organization, so one organization never holds it alone). Past one: 429
 * naming source (deleting custom tools, or a session's end, frees them).
 * BROWSERD_WEBMCP_SOURCE_MB may lower the server's (docs/operator.md); the
 * organization's share then is at most a fifth of it, a session's at most
 * its organization's. */
#define LIM_WEBMCP_SOURCE_BYTES_PER_SESSION (16u * 1000u * 1000u)
#define LIM_WEBMCP_SOURCE_BYTES_PER_ORG     (32u * 1000u * 1000u)
#define LIM_WEBMCP_SOURCE_BYTES_ALL         (160u * 1000u * 1000u)
/* A CDP-backed custom tool's output (runtime-js/webmcp.js, as JSON): past
 * it the invocation is status error (the document's 240 KiB). */
#define LIM_WEBMCP_CDP_OUTPUT_BYTES (240u * 1024u)
/* The frames of one tab whose URLs a tools list matches custom tools
 * against (the top document first, then nested frames in document order,
 * out-of-process ones after): a page with very many iframes lists each
 * custom tool at most this many times (runtime-js/webmcp.js gets it in
 * the list request). */
#define LIM_WEBMCP_CUSTOM_FRAMES 64
/* Replays (docs/replays.md): one recording's file and duration (also the
 * default duration when max_duration_in_seconds is omitted), recordings
 * encoding at once on this host (libx264 costs a fraction of a core each),
 * the frame rate without a GPU, and how long finished recordings are kept
 * when the org's plan gives no features.browser_replays.retention_days. */
#define LIM_REPLAY_BYTES     (512LL * 1024 * 1024)
#define LIM_REPLAY_SECONDS   (4 * 3600)
#define LIM_REPLAYS_PER_HOST 4
/* An organization's share of those recordings (a session has one at most). */
#define LIM_REPLAYS_PER_ORG       2
#define LIM_REPLAY_FPS            20
#define LIM_REPLAY_RETENTION_DAYS 7
/* Bytes of stored telemetry events (their JSON data) one organization keeps,
 * across its sessions and a cluster's nodes: past it, its oldest events are
 * deleted until it holds nine tenths (telemetry/telemetry.c org_use_trim).
 * Before it, events were kept for the retention (7 days) whatever their
 * volume: a page logging to the console in a loop stored 15 MB a second.
 * BROWSERD_TELEMETRY_ORG_MB may lower it. */
#define LIM_TELEMETRY_ORG_STORED_BYTES (2LL * 1024 * 1024 * 1024)

/* Bytes of saved profile archives one organization keeps on this host's
 * disk, its profiles together, whatever its plan (enterprise has no
 * limits.max_profiles or max_profile_bytes, so before it an organization
 * could keep any number of archives of up to LIM_PROFILE_ARCHIVE_BYTES
 * each). A save that would take the organization past it is refused and
 * the profile keeps its previous state (BROWSERD_PROFILE_ORG_MB may lower
 * it; docs/profiles.md). */
#define LIM_PROFILE_ORG_BYTES (8LL * 1024 * 1024 * 1024)

/* Bytes of finished recordings one organization keeps on this host's disk:
 * when a recording starts, the organization's oldest finished recordings
 * are deleted until the rest fit (BROWSERD_REPLAY_ORG_MB may lower it).
 * Without it an organization recording a changing screen, two at a time,
 * kept every file for the retention's 7 days: bounded by nothing but the
 * disk (red team pass 45). */
#define LIM_REPLAY_ORG_STORED_BYTES (8LL * 1024 * 1024 * 1024)
/* Recordings one organization keeps on this host, running ones included:
 * when one starts, its oldest finished ones are deleted until the rest
 * leave room (BROWSERD_REPLAY_ORG_COUNT may lower it). A recording started
 * and stopped at once is about 3 KB in three files, so the bytes above let
 * a start/stop loop (two a second per session) keep millions, each read by
 * every start's trim and the minute's sweep on the host, whoever starts it. */
#define LIM_REPLAY_ORG_STORED_COUNT 10000
/* browsers.computer: the longest one call (an action, or a whole batch) may
 * hold its session's input and a server thread, counting the sleeps and
 * pauses it asks for (more is a 400 before anything runs) and enforced while
 * it runs; and how long a call waits for the session's input while another
 * call holds it (then 429 with Retry-After). */
#define LIM_COMPUTER_CALL_MS      60000
#define LIM_COMPUTER_LOCK_WAIT_MS 5000
/* Top-level windows of a headful session's display looked at when its
 * browser's window is grown to the whole screen (xin_fill_screen): two round
 * trips each, at launch, on a display the session's user could fill with
 * windows. A browser just launched has a handful. */
#define LIM_X_FILL_WINDOWS 64
/* browsers.curl: requests in flight on this server (each holds a thread of
 * the HTTP pool and a page of a browser for up to its timeout), and each
 * organization's and each session's share of them (core/share.h); the last
 * SHARE_RESERVE(32) = 4 are kept for organizations holding none. */
#define LIM_CURL_INFLIGHT             32
#define LIM_CURL_INFLIGHT_PER_ORG     8
#define LIM_CURL_INFLIGHT_PER_SESSION 4
/* Threads that run the handlers of HTTP_ROUTE_BLOCKING routes (a browser
 * launch, an input gesture, a fetch through the browser), started as
 * requests need them; past it, such requests queue in arrival order. */
#define LIM_HTTP_BLOCKING_THREADS 64
/* Connections (docs/http.md, "Hostile clients"): open at once on the
 * listener (BROWSERD_MAX_CONNECTIONS; at most half the process's open-files
 * limit), open at once from one client address (BROWSERD_CONNECTIONS_PER_IP;
 * upgraded WebSockets count), and the seconds a connection has to deliver a
 * whole request head, counted from its accept or from the end of its previous
 * response (BROWSERD_HEAD_TIMEOUT_SECONDS), however slowly its bytes trickle. */
#define LIM_HTTP_CONNECTIONS        8192u
#define LIM_HTTP_CONNECTIONS_PER_IP 256u
#define LIM_HTTP_HEAD_SECONDS       10u
/* Request bodies held in memory at once, every request together
 * (BROWSERD_BODY_BUDGET_MB), and the part of it one tenant (an organization,
 * or a client address before authentication) may hold
 * (BROWSERD_BODY_TENANT_MB): two full uploads and change. Past the share a
 * request is refused with 429, past the budget with 503, before its body is
 * read. */
#define LIM_HTTP_BODY_BUDGET_BYTES ((size_t)512 * 1024 * 1024)
#define LIM_HTTP_BODY_TENANT_BYTES ((size_t)160 * 1024 * 1024)
/* A request refused on its head (401, 404, 413, 429...) whose body is at
 * most this is read and dropped, never kept, so that its connection stays
 * open for the next request; a larger body is not read at all (the answer
 * comes at once and the connection closes). */
#define LIM_HTTP_DRAIN_BYTES (64u * 1024u)
/* A connection refused before its larger body was read lingers this long
 * after its answer, its input read and dropped, so that the client reads the
 * answer rather than a reset (nginx's lingering_close); at most this many
 * sockets linger at once, the others are closed at once. */
#define LIM_HTTP_LINGER_MS    5000
#define LIM_HTTP_LINGER_CONNS 256
/* Each tenant's share of those threads: calls queued or running at once for
 * one organization, and for one session of it (http/fairshare.h). Past it,
 * 429 with Retry-After, so that one tenant never holds every thread. */
#define LIM_HTTP_BLOCKING_PER_ORG     (LIM_HTTP_BLOCKING_THREADS / 2)
#define LIM_HTTP_BLOCKING_PER_SESSION 8

/* Each log file a session's processes write on the server's disk
 * (Chromium's stderr, Xvfb's, chromedriver's, ffmpeg's: runtime/logcap.h);
 * what an earlier process of the session wrote to the same file counts. */
#define LIM_SESSION_LOG_BYTES (8LL * 1024 * 1024)

/* A profile's saved archive (profiles.c), whatever the plan's
 * limits.max_profile_bytes (null on enterprise): a save whose archive is
 * larger is refused and the profile keeps its previous state. */
#define LIM_PROFILE_ARCHIVE_BYTES (512LL * 1024 * 1024)

/* Pagination. */
#define LIM_LIST_DEFAULT 20
#define LIM_LIST_MAX     100

/* OTLP export (docs/telemetry.md): sender threads, all destinations
 * together, and those one organization's destinations may hold at once (a
 * hung collector holds one for one attempt); the share of the export queue
 * (BROWSERD_TELEMETRY_EXPORT_QUEUE) one organization may fill (1/4), and one
 * destination of its organization's share (1/2). */
#define LIM_OTLP_SENDERS         16
#define LIM_OTLP_SENDERS_PER_ORG 2
#define LIM_OTLP_ORG_SHARE       4
#define LIM_OTLP_DEST_SHARE      2
/* OTLP destinations one organization may configure: each has its own
 * export queue and retry state (docs/telemetry.md), so their number is a
 * tenant's share of the exporter too. A create past it is a 409
 * limit_exceeded (a stored count: deleting one helps, waiting does not). */
#define LIM_OTLP_DESTS_PER_ORG 10
/* Admission of sessions against the host (runtime/admit.h, docs/sandbox.md
 * "Tenant fairness: memory and pids"): the share of the server's memory and
 * pids budgets one organization may hold; the task ids left to the host and
 * the server (not handed to sessions' pids limits); the default ratio of the
 * sum of sessions' memory limits to the host's memory (a limit is a ceiling:
 * a headless Chromium at rest takes a few hundred MiB of its 8 GiB, and 16
 * lets one organization run 35 default sessions on a 24 GiB host, 4 gave it
 * 8, fewer than a client's "20 sessions at once"; the
 * sessions' parent cgroup, LIM_HOST_MEMORY_RESERVE_BYTES below the host's
 * memory, keeps an overcommitted host's out-of-memory kills among the
 * sessions); the Retry-After of a refusal; the memory kept out of the
 * sessions' parent cgroup for the server and the host. */
#define LIM_ADMIT_ORG_SHARE_PCT       75
#define LIM_ADMIT_HOST_PIDS           4096
#define LIM_ADMIT_OVERCOMMIT_DEFAULT  16.0
#define LIM_ADMIT_OVERCOMMIT_MAX      64.0
#define LIM_ADMIT_RETRY_AFTER_S       10
#define LIM_HOST_MEMORY_RESERVE_BYTES (2LL * 1024 * 1024 * 1024)

/* The MCP endpoint (/mcp, api/mcp.c, docs/mcp.md): MCP sessions the server
 * keeps at once, and one organization's share of them (past it, 429 with
 * Retry-After: one tenant never fills the table); an MCP session unused this
 * long ends with its browser (the browser is created with this
 * timeout_seconds, so it also ends by itself); how long a call waits for an
 * earlier call of the same MCP session (calls on one session run one at a
 * time) before 429; the text of one accessibility snapshot; the JSON-RPC
 * request body is LIM_BODY_BYTES as any other. */
#define LIM_MCP_SESSIONS         256
#define LIM_MCP_SESSIONS_PER_ORG 16
#define LIM_MCP_IDLE_SECONDS     600
#define LIM_MCP_BUSY_WAIT_MS     30000
#define LIM_MCP_SNAPSHOT_BYTES   (256u * 1024u)
#define LIM_MCP_RETRY_AFTER_S    10
/* The longest timeout_sec of the MCP repl tool (the hosted MCP server's
 * browser_repl caps it at 150; the REPL itself allows 300). */
#define LIM_MCP_REPL_TIMEOUT_S 150

/* Metrics (core/metrics.h, GET /metrics): the routes whose requests are
 * counted one by one (the route table's size is far below it; requests of
 * routes past it count as unmatched), the longest line of the exposition,
 * and the whole text's cap (a few hundred routes' histograms take well
 * under 1 MiB). */
#define LIM_METRICS_ROUTES     1024
#define LIM_METRICS_LINE_BYTES 1024
#define LIM_METRICS_TEXT_BYTES (4u * 1024 * 1024)

/* Audit log (telemetry/audit.h, docs/telemetry.md "Audit logs"). Entries
 * waiting for the audit writer, at most: the request path never waits for
 * the store, so a store slower than the calls fills this queue. */
#define LIM_AUDIT_QUEUE 16384u
/* One organization's share of that queue (the operator's entries, failed
 * authentications of no known organization, have one share too), so that
 * one tenant never fills the queue for the others. A change holds its
 * entry's place from admission: past the share it is refused 429 before it
 * acts (api/audit.h api_audit_admit); entries that hold no place (failed
 * authentications) are dropped and counted until the writer took the queue. */
#define LIM_AUDIT_QUEUE_PER_ORG (LIM_AUDIT_QUEUE / 8u)
/* Bytes the audit spool (<data>/audit-spool.*) may hold at once: records of
 * entries not yet in the store. It grows only while the store refuses
 * batches (an outage); past the cap, or past an organization's share of it
 * (LIM_AUDIT_SPOOL_BYTES / LIM_AUDIT_SPOOL_ORG_DIV), a change that would
 * need an entry is refused 503 before it acts (api/audit.h api_audit_admit),
 * so that nothing acknowledged goes unaudited and one organization's burst
 * never fills the folder for the others. As every share (core/share.h), its
 * last LIM_AUDIT_SPOOL_BYTES / LIM_SHARE_RESERVE_DIV bytes are kept for
 * organizations with nothing spooled. BROWSERD_AUDIT_SPOOL_MB may set a
 * smaller cap (docs/operator.md). */
#define LIM_AUDIT_SPOOL_BYTES   (64LL * 1024 * 1024)
#define LIM_AUDIT_SPOOL_ORG_DIV 8
/* Bytes of a stored path or user agent (the client's bytes; longer ones are
 * cut). */
#define LIM_AUDIT_FIELD_BYTES 1024u
/* Bytes of one record of the audit spool (telemetry/auditspool.h): an entry
 * as one JSON line, its six client strings of LIM_AUDIT_FIELD_BYTES each at
 * most doubled by JSON's escapes, plus the fixed fields. A record is one
 * write(); a longer line read back is skipped. */
#define LIM_AUDIT_SPOOL_RECORD_BYTES (6u * 2u * LIM_AUDIT_FIELD_BYTES + 1024u)
/* Entries of one GET /audit-logs page (limit; the service's 100) and of one
 * export chunk; the longest window of a page's query (the service's 30 days). */
#define LIM_AUDIT_PAGE           100u
#define LIM_AUDIT_CHUNK          10000u
#define LIM_AUDIT_LIST_WINDOW_MS (30LL * 86400 * 1000)
/* Bytes of one export chunk's JSON lines (before gzip): the chunk ends at
 * the last whole entry under it (X-Has-More and X-Next-Cursor then say where
 * the next starts), so that one organization's export, which runs on an
 * event thread, holds at most this much memory and this much work per call
 * (10000 entries of long client strings were about 50 MiB, plus the gzip). */
#define LIM_AUDIT_CHUNK_BYTES (4u * 1024u * 1024u)
/* Export chunks built at once (core/share.h), on the server and per
 * organization: a chunk runs on a blocking thread (about 100 ms and 12 MiB
 * for a full one), so that the exports hold at most this many of them and
 * their memory, never an event thread. Past it: 429 with Retry-After. */
#define LIM_AUDIT_EXPORTS         8
#define LIM_AUDIT_EXPORTS_PER_ORG 2
/* On a cluster the organization's 2 are counted over every node
 * (cluster/orgslot.h: each chunk is a read of the one shared database); a
 * chunk's slot expires after this long even when its give failed (a chunk
 * takes well under a second; the sweep frees a dead node's slots). */
#define LIM_AUDIT_EXPORT_SLOT_TTL_MS 300000
/* Audit entries one organization keeps in the store (the operator's log,
 * organization "", counts as one): after each batch the writer deletes an
 * organization's oldest entries past it (telemetry/audit.c), so that one
 * tenant's changes grow the shared store by at most this many rows however
 * fast it makes them (one tenant stored 1,600 entries of 3.3 KB in about
 * 2 s; 90 days of that would be gigabytes). 20000 keeps the 90 days of the
 * retention for an organization making a change every 6.5 minutes, and at
 * most about 125 MiB of rows (an entry is at most its six client strings of
 * LIM_AUDIT_FIELD_BYTES plus the fixed fields, about 6.2 KiB); trimming
 * walks at most this many index entries of the organization's per batch
 * (about 0.6 ms for 20000 on SQLite, docs/telemetry.md). BROWSERD_AUDIT_ROWS_PER_ORG may set a
 * smaller bound (docs/operator.md). */
#define LIM_AUDIT_ROWS_PER_ORG 20000
/* Access log lines (core/log.h log_access) held for the log writer, in
 * bytes; past it lines are dropped and counted, never waited for. */
#define LIM_LOG_BUFFER_BYTES (1024u * 1024u)
/* An access log line's method and path fields (core/log.h log_access), in
 * bytes with their NUL: a longer one is cut, after escaping. */
#define LIM_LOG_METHOD_BYTES 64u
#define LIM_LOG_PATH_BYTES   1024u

/* The largest concurrency cap an organization may set on itself or a
 * project (/org/limits, /org/projects/{id}/limits; 0 removes a cap): far
 * above any host's browsers, small enough that sums of counts and caps never
 * overflow. */
#define LIM_CONCURRENCY_CAP_MAX 1000000

/* Records every organization may create for itself, in the one shared
 * database (docs/sandbox.md "Tenant fairness: records without a count"):
 * proxies (in all its projects), projects, and live API keys (neither
 * deleted nor expired; the admin API and the bootstrap key are the
 * operator's and not counted). A create past a cap is 429 limit_exceeded
 * with Retry-After LIM_RECORDS_RETRY_AFTER_S; the count is taken in the
 * insert under the org's row lock, so nodes of a cluster share it. Deleted
 * and expired keys are kept (GET shows them) up to LIM_API_KEYS_ENDED_KEPT
 * per organization, the newest; older ones are deleted at the org's next
 * key create, so create-and-delete loops cannot grow the table. */
#define LIM_PROXIES_PER_ORG       1000
#define LIM_PROJECTS_PER_ORG      1000
#define LIM_API_KEYS_PER_ORG      1000
#define LIM_API_KEYS_ENDED_KEPT   100
#define LIM_RECORDS_RETRY_AFTER_S 60

/* Ended browser sessions (status deleted) one organization keeps in the
 * shared database: the newest LIM_SESSIONS_ENDED_KEPT by deleted_at stay
 * readable through GET /browsers?status=deleted and GET /browsers/{id}
 * ?include_deleted=true; older ones are deleted (with their telemetry
 * events) when the org's next session ends, so a POST + DELETE /browsers
 * loop cannot grow the table, each row holding the session's settings
 * (docs/store.md). BROWSERD_SESSIONS_ENDED_KEPT may lower it. */
#define LIM_SESSIONS_ENDED_KEPT 5000

/* Credentials (/credentials, api/credentials.c, docs/credentials.md): how many
 * one organization stores (past it, 429 with Retry-After: the table is
 * shared by every tenant of the server); the keys of one credential's values;
 * one key's length; one value's length (a sealed secret: at most
 * SECRETBOX_PLAIN_MAX); a TOTP secret's length in base32 characters (320
 * bytes of key material, more than any authenticator issues); a name or
 * domain. */
#define LIM_CREDENTIALS_PER_ORG       1000
#define LIM_CREDENTIAL_VALUES         32
#define LIM_CREDENTIAL_KEY_BYTES      128
#define LIM_CREDENTIAL_VALUE_BYTES    4096
#define LIM_CREDENTIAL_TOTP_CHARS     512
#define LIM_CREDENTIAL_NAME_BYTES     255
#define LIM_CREDENTIALS_RETRY_AFTER_S 60

/* Vaults (/vaults, api/vaults.c, docs/credentials.md): vaults one organization
 * keeps when its plan sets no limits.max_vaults (null = unlimited: this cap
 * still holds), items of one vault, the bindings of one fill, the longest a
 * fill may take (timeout_ms), and the item events kept (the newest). */
#define LIM_VAULTS_PER_ORG        100
#define LIM_VAULT_ITEMS           1000
#define LIM_VAULT_FILL_BINDINGS   100
#define LIM_VAULT_FILL_TIMEOUT_MS 30000
#define LIM_VAULT_ITEM_EVENTS     100
/* The vaults one browser links at creation (POST /browsers {vaults}). */
#define LIM_VAULTS_PER_BROWSER 16

/* Managed auth (/auth/connections, api/authconn.c, docs/managed-auth.md):
 * connections one organization keeps when its plan sets no
 * features.managed_auth.max_connections (null = unlimited: this cap still
 * holds); login flows running at once for one organization (each is a
 * browser session that also counts against the org's session limits; on a
 * cluster counted over every node's stored flows, docs/multinode.md) and
 * on the whole server (each node); the form steps one flow walks through (identifier,
 * password, code, ...); the longest a flow lives (waiting for a person's
 * submit included); the longest one step waits for the page to load or to
 * answer a submit; timeline entries kept per connection (the newest); the
 * values one submit carries; SSE watchers of flows on the whole server
 * and per organization; the Retry-After of a refused flow. */
#define LIM_AUTHCONN_PER_ORG          1000
#define LIM_AUTHCONN_FLOWS_PER_ORG    2
#define LIM_AUTHCONN_FLOWS            16
#define LIM_AUTHCONN_STEPS            8
#define LIM_AUTHCONN_FLOW_MS          (10 * 60 * 1000)
#define LIM_AUTHCONN_STEP_MS          15000
#define LIM_AUTHCONN_TIMELINE         50
#define LIM_AUTHCONN_SUBMIT_FIELDS    16
#define LIM_AUTHCONN_WATCHERS         256
#define LIM_AUTHCONN_WATCHERS_PER_ORG 16
#define LIM_AUTHCONN_RETRY_AFTER_S    30
/* The choices one login step offers a person (account picker, MFA method
 * menu, sign-in options, SSO buttons: the rest of a longer list is not
 * offered), and the longest choice a submit may name (an id, an MFA type,
 * an SSO provider or a pending_sso_buttons selector, an XPath). */
#define LIM_AUTHCONN_CHOICES      32
#define LIM_AUTHCONN_CHOICE_BYTES 1024

/* Credential providers (/org/credential_providers, api/credprov.c,
 * docs/credentials.md): providers one organization keeps; a token's length;
 * the largest cache_ttl_seconds and priority; concurrent calls to the
 * 1Password Connect server one organization may run, and the whole
 * server's (past either, 429 with Retry-After); the deadline of one items
 * or test call (every Connect request of it shares it); one Connect
 * answer's body; the vaults and items one items call returns, and the URLs
 * kept per item; the text (ids, titles, names, paths, URLs) one items call
 * keeps from all its Connect answers (past it, 502: a hostile Connect server
 * would otherwise make one call hold LIM_CREDPROV_VAULTS answers' worth). */
#define LIM_CREDPROV_PER_ORG        20
#define LIM_CREDPROV_TOKEN_BYTES    8192
#define LIM_CREDPROV_CACHE_TTL_S    86400
#define LIM_CREDPROV_PRIORITY_MAX   1000
#define LIM_CREDPROV_CALLS_PER_ORG  2
#define LIM_CREDPROV_CALLS_TOTAL    16
#define LIM_CREDPROV_RETRY_AFTER_S  1
#define LIM_CREDPROV_TIMEOUT_MS     15000
#define LIM_CREDPROV_RESPONSE_BYTES (4 * 1024 * 1024)
#define LIM_CREDPROV_VAULTS         100
#define LIM_CREDPROV_ITEMS          5000
#define LIM_CREDPROV_ITEM_URLS      16
#define LIM_CREDPROV_ITEMS_BYTES    (4 * 1024 * 1024)

/* search (docs/search.md): provider calls in flight on this server (each
 * holds a blocking thread for up to its timeout) and one organization's (and
 * one project's) share of them (core/share.h; the last SHARE_RESERVE(32) = 4
 * are kept for organizations holding none); the largest provider answer
 * read; content fetches through a browser per search (the results past it
 * carry status unavailable and a warning) and the time all of them may take
 * (later ones carry status timeout); the longest content text kept per
 * result; the stored record's life; the longest query; the most providers
 * BROWSERD_SEARCH_PROVIDERS may name. */
#define LIM_SEARCH_INFLIGHT            32
#define LIM_SEARCH_INFLIGHT_PER_ORG    4
#define LIM_SEARCH_PROVIDER_BODY_BYTES (2u << 20)
#define LIM_SEARCH_CONTENT_FETCHES     10
#define LIM_SEARCH_CONTENT_TOTAL_MS    60000
#define LIM_SEARCH_CONTENT_CHARS       100000
#define LIM_SEARCH_TTL_MS              (24LL * 3600 * 1000)
#define LIM_SEARCH_QUERY_BYTES         2000
#define LIM_SEARCH_PROVIDERS           16
/* On a cluster the organization's 4 are counted over every node
 * (cluster/orgslot.h: the provider, its rate limit and bill, is shared); a
 * call's slot expires this long after the timeouts of the providers it may
 * try, even when its give failed. */
#define LIM_SEARCH_SLOT_GRACE_MS 60000
/* Render fetches (docs/search.md content.browser.mode render; runtime/brender):
 * pages loaded in a session's browser at once for search content, on the
 * server, per organization and per session (each is a running page in a
 * tenant's Chromium and a blocking thread for up to its timeout; a search
 * holds one while its contents are fetched, so past them POST /search
 * answers 429 with Retry-After). And what one rendered page keeps: the
 * rendered DOM read (UTF-16 code units asked for, bytes kept), the responses
 * and console errors of its telemetry kept, and one console error's bytes. */
#define LIM_SEARCH_RENDER_INFLIGHT             16
#define LIM_SEARCH_RENDER_INFLIGHT_PER_ORG     4
#define LIM_SEARCH_RENDER_INFLIGHT_PER_SESSION 2
#define LIM_RENDER_HTML_BYTES                  (2u << 20)
#define LIM_RENDER_RESPONSES                   256
#define LIM_RENDER_CONSOLE                     32
#define LIM_RENDER_CONSOLE_BYTES               1024
/* Search records (GET /search/{id}) one organization keeps on the store's
 * disk: storing one more removes its oldest, so that no tenant fills the
 * disk within the records' 24 h by searching fast (a record holds up to a
 * provider's answer and LIM_SEARCH_CONTENT_FETCHES contents, a few MiB). */
#define LIM_SEARCH_STORED_PER_ORG 100

/* The config registry (docs/config-registry.md): analyses running at once on
 * the server, per organization and per project (each holds browser sessions
 * of its organization while it runs; past them resolve answers 429 with
 * Retry-After); the candidate configurations one analysis tries at most (one
 * session each, one after the other); one visit's deadline (the session's
 * start and the page's answer); the most of a page's body the classifier
 * reads; the longest target URL; the most allowed_proxy_countries; the
 * analyses and the registry entries (domains) an organization keeps: past
 * them, each resolve deletes its oldest (by start, by last request). */
#define LIM_CFGREG_ANALYSES         8
#define LIM_CFGREG_ANALYSES_PER_ORG 2
#define LIM_CFGREG_CANDIDATES       4
#define LIM_CFGREG_VISIT_MS         20000
#define LIM_CFGREG_CLASSIFY_BYTES   (256u << 10)
#define LIM_CFGREG_URL_BYTES        2048
#define LIM_CFGREG_COUNTRIES        32
#define LIM_CFGREG_KEPT_ANALYSES    1000
#define LIM_CFGREG_KEPT_ENTRIES     1000
/* spares (docs/spares.md, issue 39.2): one organization holds at most
 * 1/LIM_SPARES_ORG_SHARE of the spares a server keeps of a kind (at least
 * one) as live sessions served by them; its further creates of that kind
 * launch cold, so that one tenant cannot take the spares of the others. */
#define LIM_SPARES_ORG_SHARE 2
/* Apps, deployments and invocations (api/apps.h, runtime/apprun.h). A
 * deployment's zip as uploaded (the extension archive's checks apply while
 * it unpacks: LIM_EXT_ENTRIES, LIM_EXT_UNPACKED_BYTES); an org's share of the
 * server's disk for deployments (each zip plus its unpacked bytes); one run's
 * memory cgroup and its own files (a tmpfs the app is unpacked into); the
 * build log and the logs of a run kept; an invocation's output (the JSON of
 * the action's return; larger fails the invocation) and payload; how long a
 * discovery and a sync invocation may run; the async timeout's range and
 * default; env vars per deployment; browsers one invocation may hold; events
 * kept per deployment or invocation for followers. */
#define LIM_APP_ZIP_BYTES               (50u * 1024u * 1024u)
#define LIM_APP_ORG_DISK_BYTES          (1024LL * 1024 * 1024)
#define LIM_APP_MEMORY_BYTES            (1024LL * 1024 * 1024)
#define LIM_APP_FILES_BYTES             (512LL * 1024 * 1024)
#define LIM_APP_LOG_BYTES               (256u * 1024u)
#define LIM_APP_OUTPUT_BYTES            (1u * 1024u * 1024u)
#define LIM_APP_PAYLOAD_BYTES           (1u * 1024u * 1024u)
#define LIM_APP_DISCOVER_TIMEOUT_S      60
#define LIM_APP_SYNC_TIMEOUT_S          300
#define LIM_APP_ASYNC_TIMEOUT_MIN_S     10
#define LIM_APP_ASYNC_TIMEOUT_MAX_S     3600
#define LIM_APP_ASYNC_TIMEOUT_DEFAULT_S 900
#define LIM_APP_ENV_VARS                64
#define LIM_APP_ENV_VALUE_BYTES         (32u * 1024u)
#define LIM_APP_INVOCATION_BROWSERS     16
#define LIM_APP_EVENTS                  1024
/* Event logs of ended deployments and invocations kept in memory for late
 * followers (older ones answer from the stored record). */
#define LIM_APP_EVENT_LOGS 256
/* Connections one run may hold open at once through its API relay. */
#define LIM_APP_RELAY_CONNS 64
/* Connections of all the app runs' relays (the API's and the registry's; a
 * pump thread each) on the server, and one organization's part: past it a
 * run's new connection is closed. Before, only the per-run cap bounded them:
 * a plan's 50 runs at once times 64 was 3200 threads of one organization
 * (red team pass 45). A run (both its relays) keeps its 2 x 64. */
#define LIM_APP_RELAY_PUMPS         2048
#define LIM_APP_RELAY_PUMPS_PER_ORG 256
/* A deployment's package-lock.json that discovery checks (its resolved URLs
 * against BROWSERD_APPS_NPM_REGISTRY, docs/apps.md): larger fails the
 * deployment. 8 MiB holds the lock files of large real apps (a few
 * thousand packages at ~1 KiB each). */
#define LIM_APP_NPM_LOCK_BYTES (8u * 1024u * 1024u)
/* npm ci inside a run (docs/apps.md "Dependencies"): its deadline; the
 * registry relay's CONNECT head (bytes, and seconds to send it). */
#define LIM_APP_NPM_TIMEOUT_S  120
#define LIM_APP_NPM_HEAD_BYTES 4096
#define LIM_APP_NPM_HEAD_S     10

/* The CPU weight an organization's foreground session groups share when the
 * CPU is busy (runtime/sandbox.c, docs/sandbox.md "CPU per organization"):
 * cpu.shares on cgroup v1 (1024 is a group's default), cpu.weight on v2
 * (100), divided among the organization's sessions and app runs, so that N
 * busy sessions of one organization take no more than one of another's. */
#define LIM_CPU_SHARES_PER_ORG 1024
#define LIM_CPU_WEIGHT_PER_ORG 100

/* Cluster-wide organization slots (cluster/orgslot.h): the Retry-After of
 * a take refused because the organization holds its share on the nodes
 * together (a slot lasts one provider call or export chunk). */
#define LIM_ORG_SLOT_RETRY_AFTER_S 1

#endif
