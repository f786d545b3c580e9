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
/* A sandboxed session's Chromium profile (its user-data folder): a tmpfs of
 * this size (sandbox_home_mount). Chromium sizes its HTTP cache from the free
 * space it sees (80 MB on 512 MiB), and every page written counts against the
 * session's memory limit. */
#define LIM_SESSION_PROFILE_BYTES (512LL * 1024 * 1024)
/* multipart/form-data uploads: most parts per body, and most header bytes of
 * one part (its Content-Disposition and Content-Type lines). */
#define LIM_MULTIPART_PARTS        256
#define LIM_MULTIPART_HEADER_BYTES (8u * 1024u)
/* browsers.fs (docs/fs.md): entries one list_files answers; entries and
 * unpacked bytes of one upload_zip (the session's 1 GiB tmpfs stops the rest);
 * download_dir_zip streams being zipped at once on this server (a thread
 * each); watches per session and folders one recursive watch may cover. */
#define LIM_FS_LIST_ENTRIES       100000u
#define LIM_FS_ZIP_ENTRIES        10000u
#define LIM_FS_ZIP_UNPACKED_BYTES (512LL * 1024 * 1024)
#define LIM_FS_ZIP_STREAMS        16
#define LIM_FS_WATCHES            16
#define LIM_FS_WATCH_DIRS         1024
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
/* All exec output the server holds at once, every session together: past
 * it, output is dropped (and said truncated) rather than held. */
#define LIM_PROC_OUTPUT_TOTAL_BYTES (256u * 1024u * 1024u)
/* playwright.execute: timeout_sec bounds and the runner's stdout/stderr kept. */
#define LIM_PW_TIMEOUT_MAX_S 300
#define LIM_PW_OUTPUT_BYTES  (1u * 1024u * 1024u)
/* Replays (docs/replays.md): one recording's file and duration (also the
 * default duration when max_duration_in_seconds is omitted), recordings
 * encoding at once on this host (libx264 costs a fraction of a core each),
 * the frame rate without a GPU, and how long finished recordings are kept
 * when the org's plan gives no features.browser_replays.retention_days. */
#define LIM_REPLAY_BYTES          (512LL * 1024 * 1024)
#define LIM_REPLAY_SECONDS        (4 * 3600)
#define LIM_REPLAYS_PER_HOST      4
#define LIM_REPLAY_FPS            20
#define LIM_REPLAY_RETENTION_DAYS 7
/* Pagination. */
/* Threads that run the handlers of HTTP_ROUTE_BLOCKING routes (a browser
 * launch, an input gesture, a fetch through the browser), started as
 * requests need them; past it, such requests queue in arrival order. */
#define LIM_HTTP_BLOCKING_THREADS 64

#define LIM_LIST_DEFAULT 20
#define LIM_LIST_MAX     100

/* Admission of sessions against the host (runtime/admit.h, docs/sandbox.md
 * "Tenant fairness: memory and pids"): the share of the server's memory and
 * pids budgets one organization may hold; the task ids left to the host and
 * the server (not handed to sessions' pids limits); the default ratio of the
 * sum of sessions' memory limits to the host's memory (a limit is a ceiling:
 * a headless Chromium at rest takes a few hundred MiB of its 8 GiB; the
 * sessions' parent cgroup, LIM_HOST_MEMORY_RESERVE_BYTES below the host's
 * memory, keeps an overcommitted host's out-of-memory kills among the
 * sessions); the Retry-After of a refusal; the memory kept out of the
 * sessions' parent cgroup for the server and the host. */
#define LIM_ADMIT_ORG_SHARE_PCT       75
#define LIM_ADMIT_HOST_PIDS           4096
#define LIM_ADMIT_OVERCOMMIT_DEFAULT  4.0
#define LIM_ADMIT_OVERCOMMIT_MAX      64.0
#define LIM_ADMIT_RETRY_AFTER_S       10
#define LIM_HOST_MEMORY_RESERVE_BYTES (2LL * 1024 * 1024 * 1024)

#endif
