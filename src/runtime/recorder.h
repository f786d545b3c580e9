/*
 * recorder: one replay recording of a session's screen, encoded by ffmpeg
 * (libx264, fragmented MP4) running INSIDE the session's sandbox, so that
 * its CPU and memory count in the session's cgroup.
 *
 * Two sources:
 *  - headful sessions: ffmpeg grabs the session's X display itself
 *    (`-f x11grab -i :N`; ffmpeg joins the session's network namespace,
 *    where the display's abstract socket lives);
 *  - headless sessions (no display): the recorder's thread takes JPEG
 *    screenshots of the first page over the browser's DevTools
 *    (Page.captureScreenshot) at the frame rate and pipes them into ffmpeg
 *    (`-f image2pipe -c:v mjpeg -i pipe:0`); when a capture is slower than a
 *    frame, the last picture is repeated so the video keeps wall-clock time.
 *
 * ffmpeg writes the MP4 to its stdout; the recorder's thread copies it into
 * a file of the server's (outside the session's files: the session cannot
 * read or tamper with it) and stops the recording at the size cap.
 * Fragmented MP4 (empty moov, a fragment per keyframe): a recording cut short
 * (ffmpeg killed, server gone) is still a playable file up to its last
 * fragment.
 *
 * Stop: `q` on ffmpeg's stdin (headful) or the end of the frame pipe
 * (headless) lets ffmpeg finish the file; one that does not finish within
 * RECORDER_FINISH_MS is killed.
 *
 * Threading: one thread per recording; every function here is thread-safe.
 */
#ifndef BD_RUNTIME_RECORDER_H
#define BD_RUNTIME_RECORDER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define RECORDER_FFMPEG    "/usr/bin/ffmpeg"
#define RECORDER_FINISH_MS 30000

struct sandbox;
struct recorder;
struct cdp_client;

struct recorder_opts {
    const struct sandbox *sb; /* the session's sandbox (borrowed; referenced while recording) */
    int display;              /* >= 0: grab X display :N (headful); -1: DevTools screenshots */
    const char *ws_url;       /* headless: the browser's DevTools URL */
    /* headless, optional: the session's DevTools URL now (a browser restarted
     * with a profile listens elsewhere), asked when the connection is lost;
     * 0 and out filled, or -1 when the session has ended. ctx must outlive
     * the recorder (the server's app). */
    int (*ws_lookup)(void *ctx, const char *session_id, char *out, size_t cap);
    void *ws_ctx;
    const char *session_id; /* for ws_lookup (copied) */
    int width, height;      /* the picture (the viewport); made even for the encoder */
    int framerate;          /* frames per second, >= 1 */
    int max_seconds;        /* the recording ends by itself after this */
    long long max_bytes;    /* and when the file reaches this size */
    const char *out_path;   /* the MP4 file to write (created, mode 0600) */
    const char *log_path;   /* ffmpeg's stderr (appended), may be NULL */
};

/* Starts recording: creates out_path, launches ffmpeg in the sandbox and the
 * recorder's thread. *out is owned (recorder_free). E_INTERNAL when a file,
 * the launch or the thread fails. */
int recorder_start(const struct recorder_opts *o, struct recorder **out, struct err *e) WUR;

/* Asks the recording to finish (non-blocking; idempotent). */
void recorder_stop(struct recorder *r);
/* Waits up to timeout_ms for the file to be complete. 1 when it is. */
int recorder_wait(struct recorder *r, int timeout_ms);
/* 1 once the file is complete (ffmpeg exited, the file closed). */
int recorder_done(struct recorder *r);
/* Wall-clock ms when the file was completed (0 while not). */
int64_t recorder_finished_at(struct recorder *r);
/* Bytes written to the file so far. */
long long recorder_bytes(struct recorder *r);
/* Stops, waits for the end (bounded by RECORDER_FINISH_MS, then kills) and
 * frees. Accepts NULL. */
void recorder_free(struct recorder *r);

/* JPEG pictures of a browser's first page over its DevTools (the headless
 * recorder's source, and the live view's). One user at a time; zero it to
 * start, rec_shooter_close to end. */
struct rec_shooter {
    struct cdp_client *cc;
    char sid[128];
};
/* One JPEG at quality 1..100 (owned, *len bytes), or NULL when the browser
 * gives none (the connection is dropped and reopened next time: the page may
 * have been replaced). */
unsigned char *rec_shooter_take(struct rec_shooter *s, const char *ws_url, int quality,
                                size_t *len);
void rec_shooter_close(struct rec_shooter *s);
/* Connects s to the browser and attaches to its first page (s->cc, s->sid
 * set), for callers that send the page their own commands (the live view's
 * screencast). 0, or the failure in e (s left closed). */
int rec_shooter_attach(struct rec_shooter *s, const char *ws_url, struct err *e) WUR;

/* The page's screencast (Page.startScreencast): the browser pushes a JPEG
 * when the page changes, with at most two frames unacknowledged. Each frame
 * is acked as it arrives (the browser encodes the next while this one is
 * used) and only the newest is kept in frame: a slow consumer gets fewer
 * frames, never a backlog, and a static page costs nothing. Zero it to
 * start; one user at a time. */
struct rec_cast {
    struct rec_shooter sh; /* the DevTools connection and the page's session */
    unsigned char *frame;  /* the newest frame not yet taken (owned; the caller may take it) */
    size_t len;
    json_t *ack;      /* the screencast sessionId of the frame being acked */
    int64_t retry_at; /* for the caller: when to try rec_cast_start again */
};
/* Attaches to the first page and starts its screencast (JPEG at quality).
 * 0, or -1 (c left closed). */
int rec_cast_start(struct rec_cast *c, const char *ws_url, int quality) WUR;
/* Takes the frames that arrived, waiting up to ms for the first; the newest
 * is in c->frame. 0, or -1 when the browser's connection is gone (close and
 * start again). */
int rec_cast_pump(struct rec_cast *c, int ms) WUR;
void rec_cast_close(struct rec_cast *c);

#endif
