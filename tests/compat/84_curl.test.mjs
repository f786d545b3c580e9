// Issue 20, part 4: browsers.curl (SESSION_API.md section 7.1), an HTTP
// request made by the session's browser: through Chromium's network stack
// (its cookies, User-Agent, egress proxy and rules), redirects followed by
// Chromium, the target's status and multi-valued headers returned as data,
// and a 502 transport error record when the request cannot be made: the
// same refusal of loopback, link-local and the host as the browser's own
// traffic. Against the real binary with real Chromium and loopback sites.
import http from 'node:http';
import { chromium } from 'playwright-core';
import { startServer, request, assert, eq } from '../blackbox/lib.mjs';

// A site the browsers may reach (--allow-loopback) and its routes.
async function site() {
  const srv = http.createServer((rq, rs) => {
    let body = '';
    rq.on('data', (d) => { body += d; });
    rq.on('end', () => {
      const u = new URL(rq.url, 'http://x');
      if (u.pathname === '/set') {
        rs.setHeader('set-cookie', 'from_browser=yes; Path=/');
        rs.setHeader('content-type', 'text/html');
        return rs.end('<title>set</title>');
      }
      if (u.pathname === '/redir') { rs.writeHead(302, { location: '/echo?redirected=1' }); return rs.end(); }
      if (u.pathname === '/redir307') { rs.writeHead(307, { location: '/echo?kept=1' }); return rs.end(); }
      if (u.pathname === '/bin') { rs.setHeader('content-type', 'application/octet-stream'); return rs.end(Buffer.from([...Array(256).keys()])); }
      if (u.pathname === '/slow') return; // never answers
      if (u.pathname === '/teapot') { rs.writeHead(418, { 'content-type': 'text/plain' }); return rs.end('short and stout'); }
      rs.setHeader('set-cookie', ['a=1; Path=/', 'b=2; Path=/']);
      rs.setHeader('x-multi', 'one');
      rs.writeHead(201, { 'content-type': 'application/json' });
      rs.end(JSON.stringify({ method: rq.method, url: rq.url, headers: rq.headers, body }));
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const port = srv.address().port;
  return { url: `http://127.0.0.1:${port}`, hostport: `127.0.0.1:${port}`, close: () => { srv.closeAllConnections(); srv.close(); } };
}

async function withSite(fn) {
  const w = await site();
  const other = await site(); // not allowed: loopback is refused
  const s = await startServer({ args: ['--allow-loopback', w.hostport], env: { BROWSERD_ADMIN_TOKEN: 'adm' } });
  try { await fn(s, w, other); } finally { await s.stop(); s.cleanup(); w.close(); other.close(); }
}

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

const curl = (s, id, body, key) => api(s, 'POST', `/browsers/${id}/curl`, body, key);

export const tests = [
  {
    name: 'curl: a GET made by the browser returns the status, multi-valued headers and body as data; it carries the browser\'s cookies and User-Agent',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      // A cookie set by a page the browser visited goes with curl's request.
      const br = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const pg = br.contexts()[0].pages()[0];
        await pg.goto(`${w.url}/set`);
        const ua = await pg.evaluate(() => navigator.userAgent);
        const r = await curl(s, b.session_id, { url: `${w.url}/echo?x=1` });
        eq(r.status, 200, r.text);
        eq(r.json.status, 201, 'the target\'s status is data');
        assert(Number.isInteger(r.json.duration_ms) && r.json.duration_ms >= 0, 'duration_ms');
        const setCookie = Object.entries(r.json.headers).find(([k]) => k.toLowerCase() === 'set-cookie');
        assert(setCookie && setCookie[1].length === 2, `two Set-Cookie values: ${JSON.stringify(r.json.headers)}`);
        for (const v of Object.values(r.json.headers)) assert(Array.isArray(v), 'every header is an array');
        const echo = JSON.parse(r.json.body);
        eq(echo.method, 'GET', 'method');
        eq(echo.url, '/echo?x=1', 'url');
        assert(/from_browser=yes/.test(echo.headers.cookie || ''), `the browser's cookie was sent: ${echo.headers.cookie}`);
        eq(echo.headers['user-agent'], ua, 'the browser\'s User-Agent');
      } finally { await br.close(); }
    }),
  },
  {
    name: 'curl: POST with headers and a body reaches the target as given; Chromium follows redirects (307 keeps the method, 302 turns it into GET); a 418 is data',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      let r = await curl(s, b.session_id, { url: `${w.url}/echo`, method: 'POST', headers: { 'X-Test': 'yes', 'Content-Type': 'text/plain' }, body: 'hello body' });
      eq(r.status, 200, r.text);
      let echo = JSON.parse(r.json.body);
      eq(echo.method, 'POST', 'method');
      eq(echo.body, 'hello body', 'body');
      eq(echo.headers['x-test'], 'yes', 'a caller header');
      eq(echo.headers['content-type'], 'text/plain', 'a caller header replaces the browser\'s');
      r = await curl(s, b.session_id, { url: `${w.url}/redir307`, method: 'PUT', body: 'kept' });
      echo = JSON.parse(r.json.body);
      eq(echo.url, '/echo?kept=1', '307 followed');
      eq(echo.method, 'PUT', '307 keeps the method');
      eq(echo.body, 'kept', '307 keeps the body');
      r = await curl(s, b.session_id, { url: `${w.url}/redir` });
      eq(r.json.status, 201, 'the final status');
      eq(JSON.parse(r.json.body).url, '/echo?redirected=1', '302 followed');
      r = await curl(s, b.session_id, { url: `${w.url}/teapot`, method: 'DELETE' });
      eq(r.status, 200, r.text);
      eq(r.json.status, 418, 'a 4xx of the target is data');
      eq(r.json.body, 'short and stout', 'its body');
    }),
  },
  {
    name: 'curl: response_encoding base64 returns the exact bytes; utf8 is the default',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      const r = await curl(s, b.session_id, { url: `${w.url}/bin`, response_encoding: 'base64' });
      eq(r.status, 200, r.text);
      const bytes = Buffer.from(r.json.body, 'base64');
      eq(bytes.length, 256, 'length');
      assert(bytes.every((v, i) => v === i), 'every byte');
    }),
  },
  {
    name: 'curl: loopback not allowed, the server itself, link-local metadata and a dead port are 502 transport errors {message, net_error, net_error_name}, never reached',
    timeout: 120000,
    fn: () => withSite(async (s, w, other) => {
      const b = await create(s);
      let hits = 0;
      const probe = http.createServer((q, r) => { hits++; r.end('reached'); });
      await new Promise((r) => probe.listen(0, '127.0.0.1', r));
      try {
        for (const url of [`${other.url}/echo`, `${s.base}/org/entitlements`, `http://127.0.0.1:${probe.address().port}/`,
          'http://169.254.169.254/latest/meta-data/', 'http://[::1]:9/']) {
          const r = await curl(s, b.session_id, { url, timeout_ms: 5000 });
          eq(r.status, 502, `${url}: ${r.text}`);
          assert(typeof r.json.message === 'string' && r.json.message.length > 0, `${url}: message`);
          assert(/^ERR_/.test(r.json.net_error_name || ''), `${url}: net_error_name ${r.text}`);
        }
        eq(hits, 0, 'the refused loopback site was never reached');
        // A non-GET transport failure is not retried by the client.
        const r = await curl(s, b.session_id, { url: `${other.url}/echo`, method: 'POST', body: 'x' });
        eq(r.status, 502, r.text);
        eq(r.headers['x-should-retry'], 'false', 'x-should-retry on a failed POST');
      } finally { probe.close(); }
    }),
  },
  {
    name: 'curl: timeout_ms bounds a request to a site that never answers (502 ERR_TIMED_OUT)',
    timeout: 60000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      const r = await curl(s, b.session_id, { url: `${w.url}/slow`, timeout_ms: 1000 });
      eq(r.status, 502, r.text);
      eq(r.json.net_error_name, 'ERR_TIMED_OUT', 'net_error_name');
      eq(r.json.net_error, -7, 'net_error');
      // The browser still answers afterwards.
      const ok = await curl(s, b.session_id, { url: `${w.url}/echo` });
      eq(ok.json.status, 201, ok.text);
    }),
  },
  {
    name: 'curl: bad input is a 400 naming the field (url, method, headers, body, response_encoding, timeout_ms, unknown field)',
    timeout: 60000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      const cases = [
        [{}, 'url'], [{ url: 'file:///etc/passwd' }, 'url'], [{ url: 'ftp://h/' }, 'url'],
        [{ url: w.url, method: 'TRACE' }, 'method'], [{ url: w.url, headers: { Host: 'evil' } }, 'headers.Host'],
        [{ url: w.url, headers: { X: 'a\r\nB: c' } }, 'headers.X'], [{ url: w.url, body: 'x' }, 'body'],
        [{ url: w.url, response_encoding: 'hex' }, 'response_encoding'], [{ url: w.url, timeout_ms: 5 }, 'timeout_ms'],
        [{ url: w.url, timeout_ms: 120000 }, 'timeout_ms'], [{ url: w.url, follow: false }, 'follow'],
      ];
      for (const [body, field] of cases) {
        const r = await curl(s, b.session_id, body);
        eq(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        eq(r.json.code, 'bad_request', 'code');
        assert(r.json.message.startsWith(`${field}:`), `${JSON.stringify(body)} names ${field}: ${r.json.message}`);
      }
    }),
  },
  {
    name: 'curl: gated like the session API: unknown or another org\'s session 404, an ended session 409 or 404',
    timeout: 60000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      eq((await curl(s, 'aaaaaaaaaaaaaaaaaaaaaaaa', { url: w.url })).status, 404, 'unknown');
      const org = await request(s.base, 'POST', '/admin/orgs', { key: 'adm', body: { name: 'other-curl' } });
      eq(org.status, 201, org.text);
      const k = await request(s.base, 'POST', `/admin/orgs/${org.json.id}/api_keys`, { key: 'adm', body: { name: 'k' } });
      eq(k.status, 201, k.text);
      eq((await curl(s, b.session_id, { url: w.url }, k.json.key)).status, 404, 'another org');
      const del = await api(s, 'DELETE', `/browsers/${b.session_id}`);
      assert(del.status === 200 || del.status === 204, `delete: ${del.status}`);
      const r = await curl(s, b.session_id, { url: w.url });
      assert(r.status === 409 || r.status === 404, `ended: ${r.status} ${r.text}`);
    }),
  },
  {
    name: 'curl: the hidden page is invisible to the session\'s own CDP clients (no new page, no page event)',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      const br = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const ctx = br.contexts()[0];
        const before = ctx.pages().length;
        let opened = 0;
        ctx.on('page', () => { opened++; });
        for (let i = 0; i < 3; i++) eq((await curl(s, b.session_id, { url: `${w.url}/echo` })).json.status, 201, 'curl');
        // A CDP round trip after the calls: any page event would have arrived before its answer.
        await ctx.pages()[0].evaluate(() => 1);
        eq(ctx.pages().length, before, 'pages');
        eq(opened, 0, 'page events');
      } finally { await br.close(); }
    }),
  },
];

// ---- the session's own URL (base_url, SESSION_API.md 7.3) ----

const sessionUrl = (b, tail, jwt) => {
  const u = new URL(`${b.base_url}/${tail}`);
  if (jwt !== undefined) u.searchParams.set('jwt', jwt);
  return u;
};
const jwtOf = (b) => new URL(b.cdp_ws_url).searchParams.get('jwt');
const raw = (u, { method = 'POST', body, headers = {} } = {}) => request(u.origin, method, u.pathname + u.search, { body, headers });

tests.push({
  name: 'base_url: the session API is served again under the Browser record\'s base_url with the session\'s jwt instead of the API key; the token works for its own session only and dies with it; jwt= is never logged',
  timeout: 120000,
  fn: () => withSite(async (s, w) => {
    const a = await create(s);
    const b = await create(s);
    assert(a.base_url && a.base_url.startsWith(s.base), `base_url below the server's address: ${a.base_url}`);
    // curl with the jwt: works, no API key needed.
    let r = await raw(sessionUrl(a, 'curl', jwtOf(a)), { body: { url: `${w.url}/echo` } });
    eq(r.status, 200, r.text);
    eq(r.json.status, 201, 'curl through base_url');
    // No jwt, a bad one, another session's, or the API key instead: refused.
    eq((await raw(sessionUrl(a, 'curl'), { body: { url: w.url } })).status, 401, 'no jwt');
    eq((await raw(sessionUrl(a, 'curl', 'x.y.z'), { body: { url: w.url } })).status, 401, 'a malformed jwt');
    eq((await raw(sessionUrl(a, 'curl', jwtOf(b)), { body: { url: w.url } })).status, 401, "another session's jwt");
    eq((await raw(sessionUrl(a, 'curl'), { body: { url: w.url }, headers: { authorization: `Bearer ${s.key}` } })).status, 401, 'the API key is not a session token');
    // Only the per-session API lives there: not the session itself, not other resources.
    eq((await raw(new URL(`${a.base_url}?jwt=${jwtOf(a)}`), { method: 'GET' })).status, 404, 'the record itself');
    const climb = await raw(new URL(`${s.base}/browser/sessions/${a.session_id}/%2e%2e/%2e%2e/org/entitlements?jwt=${jwtOf(a)}`), { method: 'GET' });
    assert(climb.status === 404 || climb.status === 401, `no climbing out of the session URL: ${climb.status}`);
    // curl/raw (browsers.fetch) relays the target's answer.
    const u = sessionUrl(a, 'curl/raw', jwtOf(a));
    u.searchParams.set('url', `${w.url}/teapot`);
    r = await raw(u, { method: 'GET' });
    eq(r.status, 418, "the target's status");
    eq(r.text, 'short and stout', "the target's body");
    eq(r.headers['x-should-retry'], 'false', 'never retried by the client');
    // The token dies with its session.
    await api(s, 'DELETE', `/browsers/${a.session_id}`);
    r = await raw(sessionUrl(a, 'curl', jwtOf(a)), { body: { url: w.url } });
    assert(r.status === 404 || r.status === 409, `an ended session's URL: ${r.status}`);
    assert(!/jwt=/.test(s.log), 'no jwt= in the server log');
  }),
});
