// A hostile tenant against the live view and replays (docs/sandbox.md
// "Tenant fairness: live view and replays"): what one session's page or one
// organization can take from the others.
// 1. Each live view viewer keeps a copy of its session's screen in the
//    server's memory, and the viewport has no upper bound: eight viewers of
//    one 4096x4096 session grew the server by 1.5 GiB. Viewers are now
//    charged for their screens (LIM_LIVE_VIEW_BYTES*: 64 MiB a session).
// 2. Recordings on a host (LIM_REPLAYS_PER_HOST 4, 2 per organization): two
//    organizations recording two sessions each refused every other
//    organization; the last one is now kept for organizations recording
//    none (the newcomer reserve of core/share).
// 3. Recordings kept: a start/stop loop makes one 3 KB recording every half
//    second per session, kept for 7 days, each read by every start (of any
//    organization) on the host. An organization now keeps at most
//    LIM_REPLAY_ORG_STORED_COUNT (BROWSERD_REPLAY_ORG_COUNT lowers it).
import { assertStartRefused, withServer, createSession, request, assert, eq, isError, waitFor, newOrg } from '../blackbox/lib.mjs';

const ADMIN = 'redteam-view-admin';

// Opens a read-only viewer of a live view URL: { ws, status: 'open' } or,
// when the upgrade is refused, { status, retryAfter, message }. closed is
// set to the close code when the server closes an open viewer.
async function viewer(url) {
  const { default: WebSocket } = await import('ws');
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws?readOnly=true');
  const v = await new Promise((resolve) => {
    ws.once('open', () => resolve({ ws, status: 'open', closed: null, frames: 0 }));
    ws.once('unexpected-response', (_, res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => {
        let message = body;
        try { message = JSON.parse(body).message; } catch { /* not JSON */ }
        resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'], message });
      });
    });
    ws.once('error', (e) => resolve({ status: `error ${e.message}` }));
  });
  if (v.ws) {
    ws.on('message', (m, binary) => { if (binary) v.frames++; });
    ws.on('close', (code) => { v.closed = code; });
  }
  return v;
}

const headful = (s, key, width, height) => createSession(s, { headless: false, viewport: { width, height } }, key);
const liveUrl = async (s, id) => (await request(s.base, 'GET', `/browsers/${id}`, { key: s.key })).json.browser_live_view_url;

// Runs fn(s, open) on a fresh server; open(url) opens a viewer (above),
// closed when fn ends.
const withViewers = (fn) => withServer({}, async (s) => {
  const viewers = [];
  const open = async (url) => { const v = await viewer(url); viewers.push(v); return v; };
  try { await fn(s, open); } finally { for (const v of viewers) if (v.ws) v.ws.close(); }
});

// A 4096x4096 screen is the session's whole share: its first viewer opens
// and gets a picture, the second is refused naming the screen memory.
async function oneViewerOf4096(open, url) {
  const first = await open(url);
  eq(first.status, 'open', `the first viewer: ${first.message}`);
  await waitFor(() => first.frames > 0, 'the first viewer gets a picture', 60000, 200);
  const second = await open(url);
  eq(second.status, 429, `a second viewer (old binary: it opened and held another 64 MiB copy of the screen): ${second.message}`);
  eq(second.retryAfter, '5', 'Retry-After');
  assert(/screen memory/.test(second.message) && /this session/.test(second.message) && /4096x4096/.test(second.message),
    `the message names the session's share of screen memory and the screen: ${second.message}`);
  return first;
}

export const tests = [
  {
    name: 'red team view: live view viewers are charged for the screen each keeps (LIM_LIVE_VIEW_BYTES_SESSION 64 MiB): a 4096x4096 session (64 MiB a screen) gets one viewer, the second is 429 with Retry-After naming the screen memory, while a small session of the same organization still gets its viewers; the share comes back when the viewer leaves',
    timeout: 180000,
    fn: () => withViewers(async (s, open) => {
      const bigUrl = await liveUrl(s, await headful(s, s.key, 4096, 4096));
      const smallUrl = await liveUrl(s, await headful(s, s.key, 800, 600));
      assert(bigUrl && smallUrl, 'headful sessions have a live view URL');
      const first = await oneViewerOf4096(open, bigUrl);
      for (let i = 0; i < 4; i++) {
        const v = await open(smallUrl);
        eq(v.status, 'open', `viewer ${i + 1} of an 800x600 session of the same organization: ${v.message}`);
      }
      first.ws.close();
      await waitFor(() => first.closed !== null, 'the first viewer is closed');
      await waitFor(async () => (await open(bigUrl)).status === 'open', 'a viewer of the large session once the first has left', 30000, 250);
    }),
  },
  {
    name: 'red team view: a viewer is charged for the screen it copies, not the record\'s viewport: a 4096x4096 session shrunk to 800x600 (PATCH viewport with force; its X screen keeps its size) still takes one viewer, the second is 429 naming the 4096x4096 screen',
    timeout: 180000,
    fn: () => withViewers(async (s, open) => {
      const id = await headful(s, s.key, 4096, 4096);
      const p = await request(s.base, 'PATCH', `/browsers/${id}`, { key: s.key, body: { viewport: { width: 800, height: 600, force: true } } });
      eq(p.status, 200, `the forced resize: ${p.text}`);
      eq(p.json.viewport.width, 800, `the record says 800x600: ${p.text}`);
      const first = await oneViewerOf4096(open, await liveUrl(s, id));
      eq(first.closed, null, 'the first viewer stays');
      // The screen cannot grow past its launch size either: a 400 naming
      // viewport and the screen, before anything is resized (the binary
      // before answered 500, its message first written over itself: "...: t
      // grow to"); the record keeps its viewport.
      const g = await request(s.base, 'PATCH', `/browsers/${id}`, { key: s.key, body: { viewport: { width: 4100, height: 4100, force: true } } });
      eq(g.status, 400, `a resize past the screen: ${g.text}`);
      assert(/^viewport: 4100x4100 is larger than this headful browser's screen \(4096x4096/.test(g.json.message), `names the field and the screen: ${g.text}`);
      eq((await request(s.base, 'GET', `/browsers/${id}`, { key: s.key })).json.viewport.width, 800, 'the record keeps its viewport');
    }),
  },
  {
    name: 'red team view: recordings on a host keep the newcomer reserve (LIM_REPLAYS_PER_HOST 4, 2 per organization, the last for organizations recording none): with one organization recording two sessions and another one, the second\'s next start is 429 too_many_recordings with Retry-After naming the reserve, and a third organization still records',
    timeout: 180000,
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      const a = { key: s.key };
      const b = await newOrg(s, ADMIN, { name: 'view-b', plan: 'enterprise' });
      const c = await newOrg(s, ADMIN, { name: 'view-c', plan: 'enterprise' });
      const start = (o, id) => request(s.base, 'POST', `/browsers/${id}/replays`, { key: o.key });
      const started = [];
      try {
        const a1 = await createSession(s, {}, a.key), a2 = await createSession(s, {}, a.key);
        const b1 = await createSession(s, {}, b.key), b2 = await createSession(s, {}, b.key);
        const c1 = await createSession(s, {}, c.key);
        for (const [o, id] of [[a, a1], [a, a2], [b, b1]]) {
          const r = await start(o, id);
          eq(r.status, 201, `a recording of ${id}: ${r.text}`);
          started.push([o, id, r.json.replay_id]);
        }
        const r = await start(b, b2);
        if (r.status === 201) started.push([b, b2, r.json.replay_id]);
        isError(r, 429, 'too_many_recordings');
        assert(Number(r.headers['retry-after']) > 0, `Retry-After: ${r.headers['retry-after']}`);
        assert(/organizations recording none/.test(r.json.message), `the message names the reserve: ${r.text}`);
        const n = await start(c, c1);
        if (n.status === 201) started.push([c, c1, n.json.replay_id]);
        eq(n.status, 201, `a third organization still records (old binary: 429, the host's 4 taken by two organizations): ${n.text}`);
      } finally {
        for (const [o, id, rid] of started) await request(s.base, 'POST', `/browsers/${id}/replays/${rid}/stop`, { key: o.key }).catch(() => {});
      }
    }),
  },
  {
    name: 'red team view: an organization keeps at most LIM_REPLAY_ORG_STORED_COUNT recordings on a host (BROWSERD_REPLAY_ORG_COUNT 3): in a start/stop loop the fourth start deletes its own oldest recording (then 404), never another organization\'s; the variable can only lower the count (10001, 0 and a non-integer stop the server, exit 2)',
    timeout: 180000,
    fn: async () => {
      await withServer({ args: ['--admin-token', ADMIN], env: { BROWSERD_REPLAY_ORG_COUNT: '3' } }, async (s) => {
        const other = await newOrg(s, ADMIN, { name: 'view-kept', plan: 'enterprise' });
        const cycle = async (key, id) => {
          const st = await request(s.base, 'POST', `/browsers/${id}/replays`, { key });
          eq(st.status, 201, `start: ${st.text}`);
          const sp = await request(s.base, 'POST', `/browsers/${id}/replays/${st.json.replay_id}/stop`, { key });
          eq(sp.status, 200, `stop: ${sp.text}`);
          return st.json.replay_id;
        };
        const download = (key, id, rid) => request(s.base, 'GET', `/browsers/${id}/replays/${rid}`, { key });
        const theirs = await createSession(s, {}, other.key);
        const kept = await cycle(other.key, theirs);
        const id = await createSession(s);
        const rids = [];
        for (let i = 0; i < 4; i++) rids.push(await cycle(s.key, id));
        eq((await download(s.key, id, rids[0])).status, 404, 'the oldest of four is deleted (old binary: kept)');
        for (const rid of rids.slice(1)) eq((await download(s.key, id, rid)).status, 200, `a newer recording ${rid} is kept`);
        const l = await request(s.base, 'GET', `/browsers/${id}/replays`, { key: s.key });
        eq(l.json.map((r) => r.replay_id), rids.slice(1), 'the list holds the three newest');
        eq((await download(other.key, theirs, kept)).status, 200, 'another organization\'s recording is never deleted for it');
      });
      assertStartRefused('BROWSERD_REPLAY_ORG_COUNT', ['10001', '0', 'x']);
    },
  },
];
