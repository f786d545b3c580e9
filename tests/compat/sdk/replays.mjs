// browsers.replays.* through the official client (SESSION_API.md section 6):
// start (201 BrowserReplay, default body {}), list (a bare array), stop (no
// body, void), download (the raw Response: 202 while recording, then
// video/mp4). Errors as the SDK's classes: 409 ConflictError for a second
// recording, 400 for record_audio, 404 for another org's session and an
// unknown replay, 403 when the plan has replays off.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function register(t) {
  const { sdkTest, withServer, rejects, assert, eq, request, errors } = t;
  const { BadRequestError, ConflictError, NotFoundError, PermissionDeniedError } = errors;
  const ADMIN = 'compat-admin-token';

  async function otherKey(s, plan) {
    const o = await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name: `replays-${plan}`, plan } });
    const k = await request(s.base, 'POST', `/admin/orgs/${o.json.id}/api_keys`, { key: ADMIN, body: { name: 'k' } });
    return k.json.key;
  }

  sdkTest('browsers.replays.start', 'start -> 201 BrowserReplay; list -> bare array; stop -> void; download -> 202 while recording, then a video/mp4 ffprobe reads; a second start -> ConflictError; record_audio -> BadRequestError', (ctx) =>
    withServer(async (s, client) => {
      for (const headless of [true, false]) {
        const mode = headless ? 'headless' : 'headful';
        const b = await client.browsers.create({ headless, viewport: { width: 640, height: 480 } });
        const r = client.browsers.replays;
        const rec = await r.start(b.session_id, { framerate: 10 });
        assert(typeof rec.replay_id === 'string' && rec.replay_id, `${mode}: replay_id: ${JSON.stringify(rec)}`);
        eq(rec.finished_at, null, `${mode}: running`);
        assert(!Number.isNaN(Date.parse(rec.started_at)), `${mode}: started_at is a date-time`);
        await rejects(() => r.start(b.session_id), ConflictError, 409, `${mode}: a second recording`);
        await rejects(() => r.start(b.session_id, { record_audio: true }), BadRequestError, 400, `${mode}: record_audio`);
        const listed = await r.list(b.session_id);
        assert(Array.isArray(listed) && listed.length === 1 && listed[0].replay_id === rec.replay_id, `${mode}: list: ${JSON.stringify(listed)}`);
        const pending = await r.download(rec.replay_id, { id: b.session_id });
        eq(pending.status, 202, `${mode}: download while recording`);
        assert(Number(pending.headers.get('retry-after')) > 0, `${mode}: Retry-After`);
        // The file needs some frames: wait until the recording has run a while.
        const t0 = Date.now();
        while (Date.now() - t0 < 1500) await new Promise((res) => setTimeout(res, 100));
        assert(!(await r.stop(rec.replay_id, { id: b.session_id })), `${mode}: stop resolves with nothing`);
        const res = await r.download(rec.replay_id, { id: b.session_id });
        eq(res.status, 200, `${mode}: download`);
        eq(res.headers.get('content-type'), 'video/mp4', `${mode}: content type`);
        const dir = mkdtempSync(join(tmpdir(), 'sdk-replay-'));
        try {
          writeFileSync(join(dir, 'r.mp4'), Buffer.from(await res.arrayBuffer()));
          const p = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration:stream=codec_name', '-of', 'json', join(dir, 'r.mp4')]).toString());
          eq(p.streams[0].codec_name, 'h264', `${mode}: H.264`);
          assert(Number(p.format.duration) > 0, `${mode}: duration ${p.format.duration}`);
        } finally { rmSync(dir, { recursive: true, force: true }); }
        const after = await r.list(b.session_id);
        assert(after[0].finished_at, `${mode}: finished_at after stop`);
        await client.browsers.deleteByID(b.session_id);
      }
    }), 120000, ['browsers.replays.list', 'browsers.replays.stop', 'browsers.replays.download']);

  sdkTest('browsers.replays.list', 'another org\'s key -> NotFoundError on list, start, stop, download; unknown replay -> NotFoundError; plan without browser_replays -> PermissionDeniedError', (ctx) =>
    withServer(async (s, client) => {
      const b = await client.browsers.create({ headless: true });
      const rec = await client.browsers.replays.start(b.session_id);
      const other = s.clientWithKey(await otherKey(s, 'enterprise')).browsers.replays;
      await rejects(() => other.list(b.session_id), NotFoundError, 404, 'list, another org');
      await rejects(() => other.start(b.session_id), NotFoundError, 404, 'start, another org');
      await rejects(() => other.stop(rec.replay_id, { id: b.session_id }), NotFoundError, 404, 'stop, another org');
      await rejects(() => other.download(rec.replay_id, { id: b.session_id }), NotFoundError, 404, 'download, another org');
      await rejects(() => client.browsers.replays.stop('nosuchreplay0', { id: b.session_id }), NotFoundError, 404, 'stop, unknown replay');
      await rejects(() => client.browsers.replays.download('nosuchreplay0', { id: b.session_id }), NotFoundError, 404, 'download, unknown replay');
      await client.browsers.replays.stop(rec.replay_id, { id: b.session_id });
      const dev = s.clientWithKey(await otherKey(s, 'developer'));
      const db = await dev.browsers.create({ headless: true });
      await rejects(() => dev.browsers.replays.start(db.session_id), PermissionDeniedError, 403, 'replays off: start');
      await rejects(() => dev.browsers.replays.list(db.session_id), PermissionDeniedError, 403, 'replays off: list');
      await dev.browsers.deleteByID(db.session_id);
      await client.browsers.deleteByID(b.session_id);
    }), 60000, []);
}
