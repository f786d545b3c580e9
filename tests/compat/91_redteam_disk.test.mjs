// Red team pass 45 (docs/sandbox.md "Tenant fairness: red team pass 45"): what
// a tenant may leave on the host's disk. Replays are files in the server's
// data folder, kept for the retention (7 days), each up to LIM_REPLAY_BYTES:
// an organization recording a changing screen two sessions at a time filled
// the disk as fast as its encoders wrote. An organization now keeps at most
// LIM_REPLAY_ORG_STORED_BYTES of finished recordings on a host (the test
// server lowers it to 1 MiB with BROWSERD_REPLAY_ORG_MB): a start deletes its
// own oldest ones first, never another organization's.
import { chromium } from 'playwright-core';
import { startServer, request, assert, eq, waitFor, newOrg } from '../blackbox/lib.mjs';

const ADMIN = 'redteam-91-disk';
const MiB = 1024 * 1024;
const api = (s, method, path, body, key) => request(s.base, method, path, { key, body });

async function create(s, key) {
  const r = await api(s, 'POST', '/browsers', { headless: true, viewport: { width: 800, height: 600 } }, key);
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

// A page of random pixels redrawn every frame: the encoder's worst case.
async function noise(b) {
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  const ctx = br.contexts()[0];
  const pg = ctx.pages()[0] || await ctx.newPage();
  await pg.setContent('<body style="margin:0"><canvas id=c width=800 height=600></canvas><script>' +
    'const g=c.getContext("2d"),im=g.createImageData(800,600),u=new Uint32Array(im.data.buffer);' +
    '(function f(){for(let i=0;i<u.length;i++)u[i]=(Math.random()*4294967296)|0xff000000;g.putImageData(im,0,0);requestAnimationFrame(f)})()</script>');
  return br;
}

// Records session b until its file holds more than `bytes`, then stops; the
// replay's id.
async function recordAtLeast(s, b, key, bytes) {
  const st = await api(s, 'POST', `/browsers/${b.session_id}/replays`, { framerate: 20 }, key);
  eq(st.status, 201, `start: ${st.text}`);
  const rid = st.json.replay_id;
  const file = `${s.dir}/replays/${b.session_id}/${rid}.mp4`;
  const { statSync } = await import('node:fs');
  await waitFor(() => { try { return statSync(file).size > bytes; } catch { return false; } }, `replay ${rid} past ${bytes} bytes`, 90000, 200);
  const sp = await api(s, 'POST', `/browsers/${b.session_id}/replays/${rid}/stop`, undefined, key);
  eq(sp.status, 200, `stop: ${sp.text}`);
  return rid;
}

const download = (s, b, rid, key) => api(s, 'GET', `/browsers/${b.session_id}/replays/${rid}`, undefined, key);

export const tests = [
  {
    name: 'red team 45: an organization keeps at most LIM_REPLAY_ORG_STORED_BYTES of finished replays on a host (BROWSERD_REPLAY_ORG_MB): a new recording deletes its own oldest ones first (then 404), never another organization\'s',
    timeout: 240000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN, BROWSERD_REPLAY_ORG_MB: '1' } });
      const browsers = [];
      try {
        const other = await newOrg(s, ADMIN, { name: 'other-91', plan: 'enterprise' });
        const b = await create(s, s.key);
        const v = await create(s, other.key);
        browsers.push(await noise(b), await noise(v));
        // The other organization's recording, over its own 1 MiB.
        const kept = await recordAtLeast(s, v, other.key, 1.2 * MiB);
        // This organization's first recording, over the 1 MiB, then a second.
        const first = await recordAtLeast(s, b, s.key, 1.2 * MiB);
        eq((await download(s, b, first, s.key)).status, 200, 'the first recording, before another starts');
        const second = await recordAtLeast(s, b, s.key, 0);
        const gone = await download(s, b, first, s.key);
        eq(gone.status, 404, `the oldest recording of the organization past its share is deleted: ${gone.status}`);
        eq((await download(s, b, second, s.key)).status, 200, 'the newest recording is kept');
        const theirs = await download(s, v, kept, other.key);
        eq(theirs.status, 200, 'another organization\'s recording is never deleted for it');
        assert(theirs.body ? theirs.body.length > MiB : theirs.text.length > 0, 'its file is whole');
      } finally {
        for (const br of browsers) await br.close().catch(() => {});
        await s.stop();
        s.cleanup();
      }
    },
  },
];
