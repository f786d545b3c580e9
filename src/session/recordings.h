/*
 * session/recordings: the recordings of sessions' screens running on this
 * host (the engine behind api/replays.c, docs/replays.md). One table holds
 * them (at most LIM_REPLAYS_PER_HOST, LIM_REPLAYS_PER_ORG of one
 * organization); each has an encoder thread of its own (runtime/recorder).
 * Every recording, running or not, has a small JSON note beside its file:
 *
 *   DATA/replays/SESSION/REPLAY.mp4   the video (fragmented MP4)
 *   DATA/replays/SESSION/REPLAY.json  {replay_id, org_id, started_at,
 *                                      finished_at, retention_days}
 *   DATA/replays/SESSION/REPLAY.log   ffmpeg's warnings
 *
 * so that the replays of ended sessions (and of a previous run of the
 * server) stay listable and downloadable. Expired ones are deleted by
 * sess_recordings_tidy, which the handlers call (at most one sweep a
 * minute), and at every session's end (no timer thread of its own).
 *
 * Threads: every function is thread-safe (one mutex guards the table; a
 * recording's file is waited for outside it). Failure: E_* codes with e.
 */
#ifndef BD_SESSION_RECORDINGS_H
#define BD_SESSION_RECORDINGS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "session/app.h"

struct live;

/* Starts a recording of live session sid (of org_id; l borrowed, ws its
 * DevTools URL) at width x height, framerate fps, for at most max_seconds,
 * kept retention_days after it ends. Its id goes to rid (rid_cap bytes, 32
 * hold it) and its start time (ms since the epoch) to *started_at. 409
 * recording_in_progress (one at a time per session), 429
 * too_many_recordings (the org's share or the host's cap, with
 * Retry-After), 503 sandbox_required, 500. */
int sess_recording_start(struct app *app, struct live *l, const char *sid, const char *org_id,
                         const char *ws, int width, int height, int framerate, int max_seconds,
                         int retention_days, char *rid, size_t rid_cap, int64_t *started_at,
                         struct err *e) WUR;

/* Stops recording rid of sid and waits for its file (a download right
 * after gets all of it): 0, or E_NOTFOUND when it is not running (finished
 * or unknown: its note tells them apart). */
int sess_recording_stop(const char *sid, const char *rid) WUR;

/* 1 while recording rid of sid (NULL: any of sid's) runs or finishes. */
int sess_recording_running(const char *sid, const char *rid);

/* The bytes of finished recordings one organization keeps on this host
 * (LIM_REPLAY_ORG_STORED_BYTES unless lowered; BROWSERD_REPLAY_ORG_MB).
 * Set once at start, before any recording. */
void sess_recordings_set_org_bytes(long long bytes);
/* The recordings one organization keeps on this host, running ones included
 * (LIM_REPLAY_ORG_STORED_COUNT unless lowered; BROWSERD_REPLAY_ORG_COUNT).
 * Set once at start, before any recording. */
void sess_recordings_set_org_count(int count);

/* Writes the notes of recordings whose encoder ended, and deletes the
 * recordings whose retention has passed (at most once a minute). */
void sess_recordings_tidy(const struct app *app);

/* The note of recording rid of sid (new reference), or NULL. */
json_t *sess_recording_note(const struct app *app, const char *sid, const char *rid);
/* The finish time of a note (ms since the epoch), or of its file when the
 * recording was cut by a server that died (the note still says null
 * then). 0 while unknown. */
int64_t sess_recording_finished_at(const struct app *app, const json_t *note, const char *sid,
                                   const char *rid);

/* A forced resize cuts a running recording into segments:
 * sess_recording_cut finishes sid's running recording (if any; waits for
 * its file) and remembers its options in *seg; sess_recording_resume
 * starts a new recording (a separate replay) with those options at width x
 * height. Failures of the new segment are logged, not reported: the resize
 * itself succeeded. */
struct sess_recording_segment {
    int active;
    int framerate;
    int seconds_left;
    int retention_days;
    char org_id[64];
};
void sess_recording_cut(const char *sid, struct sess_recording_segment *seg);
void sess_recording_resume(struct app *app, const char *sid,
                           const struct sess_recording_segment *seg, int width, int height);

/* Session sid ended: its recordings finish (the browser and its display
 * are gone: ffmpeg ends on its own or on `q`), their retention starts, and
 * the expired ones of every session are deleted. */
void sess_recordings_session_ended(const struct app *app, const char *sid);

#endif
