// Issue 33.6 (SESSION_API.md 0.2 and 7.3, KERNEL_API_NEWER.md 1.3): newer
// clients send fs, process, computer, playwright, curl, logs/stream and
// telemetry/stream calls straight to the session's base_url with ?jwt= and no
// Authorization. The pinned client (0.84.0) does the same when
// KERNEL_BROWSER_ROUTING_SUBRESOURCES names those areas: one method of each
// area is called through it against a real session, and every call is seen
// to go to base_url, also on a two-node cluster. A session's token opens no
// other session's base_url.
import Kernel from '@onkernel/sdk';
import { startServer, startSite, request, assert, eq, isError } from '../blackbox/lib.mjs';
import { startClusterServer } from '../cluster/lib.mjs';

const ROUTED = 'curl,telemetry/stream,computer,playwright,process,fs,logs/stream';

// A client configured as a newer one: the routing list from the environment
// (read when the client is built), and a fetch that records each URL it sends.
function newerClient(s, seen) {
  const saved = process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES;
  process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES = ROUTED;
  try {
    return new Kernel({
      baseURL: s.base,
      apiKey: s.key,
      maxRetries: 0,
      fetch: (url, init) => {
        const headers = new Headers(init && init.headers);
        seen.push({ url: String(url), auth: headers.has('authorization') });
        return fetch(url, init);
      },
    });
  } finally {
    if (saved === undefined) delete process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES;
    else process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES = saved;
  }
}

async function collect(stream, n) {
  const out = [];
  for await (const ev of stream) {
    out.push(ev);
    if (out.length >= n) break;
  }
  return out;
}

// One method of each routed area through a newer client against server s
// (site: a page its browsers may reach), each call seen to go to base_url.
async function routedTour(s, site) {
  const seen = [];
  const client = newerClient(s, seen);
  const b = await client.browsers.create({ headless: true, telemetry: {} });
  assert(typeof b.base_url === 'string' && b.base_url.length > 0, `base_url: ${b.base_url}`);
  const id = b.session_id;
  const routed = (tail) => {
    const hit = seen.filter((x) => x.url.startsWith(`${b.base_url}/${tail}`));
    assert(hit.length > 0, `${tail} went to base_url: ${seen.map((x) => x.url.replace(/jwt=[^&]+/, 'jwt=…')).join(' ')}`);
    for (const h of hit) {
      assert(/[?&]jwt=/.test(h.url), `${tail}: the token in ?jwt=`);
      assert(!h.auth, `${tail}: no Authorization header`);
    }
  };

  // fs: write (a raw body) and read back.
  await client.browsers.fs.writeFile(id, 'through base_url', { path: '/tmp/routed.txt' });
  eq(await (await client.browsers.fs.readFile(id, { path: '/tmp/routed.txt' })).text(), 'through base_url', 'fs read back');
  routed('fs/write_file');
  routed('fs/read_file');
  // fs upload: a multipart body through the rewrite.
  await client.browsers.fs.upload(id, { files: [{ dest_path: '/tmp/up.txt', file: new File(['uploaded'], 'up.txt') }] });
  eq(await (await client.browsers.fs.readFile(id, { path: '/tmp/up.txt' })).text(), 'uploaded', 'fs upload');
  routed('fs/upload');
  // process exec.
  const ex = await client.browsers.process.exec(id, { command: 'cat', args: ['/tmp/routed.txt'] });
  eq([ex.exit_code, Buffer.from(ex.stdout_b64, 'base64').toString()], [0, 'through base_url'], 'exec');
  routed('process/exec');
  // computer screenshot (a binary response).
  const png = Buffer.from(await (await client.browsers.computer.captureScreenshot(id)).arrayBuffer());
  eq(png.subarray(1, 4).toString(), 'PNG', 'screenshot is a PNG');
  routed('computer/screenshot');
  // playwright execute.
  const pw = await client.browsers.playwright.execute(id, { code: 'return 6 * 7' });
  eq(pw.result, 42, `playwright: ${JSON.stringify(pw)}`);
  routed('playwright/execute');
  // curl.
  const c = await client.browsers.curl(id, { url: `${site.url}/` });
  eq(c.body, 'routed hello', 'curl body');
  routed('curl');
  // logs stream (SSE through the rewrite).
  const logs = await collect(await client.browsers.logs.stream(id, { source: 'path', path: '/tmp/routed.txt', follow: false }), 1);
  eq(logs[0] && logs[0].message, 'through base_url', 'logs/stream line');
  routed('logs/stream');
  // telemetry stream (SSE through the rewrite): the calls above are events.
  const tel = await collect(await client.browsers.telemetry.stream(id, { replay: 'all' }), 1);
  assert(tel.length === 1 && typeof tel[0].seq === 'number', `telemetry/stream frame: ${JSON.stringify(tel[0])}`);
  routed('telemetry/stream');
  await client.browsers.deleteByID(id);
  return id;
}

// A session's token opens its own base_url only: another session's, of the
// same organization or another, answers 401; so does an API key as jwt.
async function jwtIsolation(s) {
  const mk = async (key) => {
    const r = await request(s.base, 'POST', '/browsers', { key, body: { headless: true } });
    eq(r.status, 200, `create: ${r.text}`);
    return { ...r.json, key, jwt: new URL(r.json.cdp_ws_url).searchParams.get('jwt') };
  };
  const o = await request(s.base, 'POST', '/admin/orgs', { key: 'adm', body: { name: 'other' } });
  const k = await request(s.base, 'POST', `/admin/orgs/${o.json.id}/api_keys`, { key: 'adm', body: { name: 'k' } });
  const a = await mk(s.key);
  const b = await mk(s.key);
  const c = await mk(k.json.key);
  const at = (sess, tail, jwt) => `${new URL(sess.base_url).pathname}/${tail}?jwt=${encodeURIComponent(jwt)}`;
  const call = (sess, jwt) => request(s.base, 'POST', at(sess, 'process/exec', jwt), { body: { command: 'id' } });
  eq((await call(a, a.jwt)).status, 200, 'its own base_url');
  isError(await call(b, a.jwt), 401);
  isError(await call(c, a.jwt), 401);
  isError(await request(s.base, 'GET', `${at(b, 'fs/read_file', a.jwt)}&path=/tmp`), 401);
  isError(await request(s.base, 'GET', `${at(c, 'logs/stream', a.jwt)}&source=path&path=/tmp/x`), 401);
  isError(await request(s.base, 'POST', at(a, 'process/exec', s.key), { body: { command: 'id' } }), 401);
  for (const x of [a, b, c]) await request(s.base, 'DELETE', `/browsers/${x.session_id}`, { key: x.key });
}

const siteSays = (rq, rs) => { rs.writeHead(200, { 'content-type': 'text/plain' }); rs.end('routed hello'); };

export const tests = [
  {
    name: 'issue 33.6: with KERNEL_BROWSER_ROUTING_SUBRESOURCES set as newer clients, fs, process, computer, playwright, curl, logs/stream and telemetry/stream calls go to base_url with ?jwt= and work; a session\'s jwt opens no other session\'s base_url (401)',
    timeout: 120000,
    fn: async () => {
      const site = await startSite(siteSays);
      const s = await startServer({ args: site.allow, env: { BROWSERD_ADMIN_TOKEN: 'adm' } });
      try {
        await routedTour(s, site);
        await jwtIsolation(s);
      } finally {
        await s.stop();
        s.cleanup();
        site.close();
      }
    },
  },
  {
    name: 'issue 33.6: on a two-node cluster behind a round-robin forwarder, calls to base_url that reach the node not running the browser are forwarded with their jwt (streams and uploads included)',
    timeout: 180000,
    fn: async () => {
      const site = await startSite(siteSays);
      const s = await startClusterServer({ nodes: 2, args: site.allow });
      try {
        const id = await routedTour(s, site);
        // Both nodes answered base_url calls (logged by their routed path):
        // those that reached the other node were forwarded to the owner.
        const nodesHit = s.cluster.nodes.filter((n) => n.log.includes(` /browsers/${id}/`)).length;
        eq(nodesHit, 2, 'both nodes received base_url calls');
      } finally {
        await s.stop();
        site.close();
      }
    },
  },
];
