// Issue 33 item 7: the audit log (KERNEL_API_NEWER.md 1.4 "Audit logs";
// docs/telemetry.md "Audit logs"), and issue 39 item 3: the access log
// written off the request path. No Chromium: profiles and proxies are the
// changes, and BROWSERD_SPARES=0 (lib.mjs).
import { gunzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import http from 'node:http';
import { startServer, request, assert, eq, isError, waitFor, withServer, newOrg, ok2xx } from './lib.mjs';

const ADMIN = 'admin-token-for-audit-tests';
const WINDOW = () => `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}` +
  `&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;

// The entries of key's organization (GET /audit-logs), filters in query.
async function entries(s, key, query = '') {
  const r = await request(s.base, 'GET', `/audit-logs?${WINDOW()}${query}`, { key });
  eq(r.status, 200, `GET /audit-logs: ${r.text}`);
  assert(Array.isArray(r.json), `an array of entries: ${r.text}`);
  return r;
}

// Waits until key's organization lists at least n entries matching query.
async function waitEntries(s, key, n, query = '') {
  return waitFor(async () => {
    const r = await entries(s, key, query);
    return r.json.length >= n ? r.json : null;
  }, `${n} audit entries${query ? ` (${query})` : ''}`);
}

const keyId = async (s, key) => ok2xx(await request(s.base, 'GET', '/auth/context', { key }), 'auth context').authentication.credential_id;

export const tests = [
  {
    name: 'issue 33.7: creating and deleting a profile are audit entries with the document\'s fields (route pattern, status, duration, client ip, user agent, key id, auth strategy); reads are not',
    fn: () => withServer({}, async (s) => {
      const ua = `audit-test/${process.pid}`;
      const p = ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, body: { name: 'aud1' }, headers: { 'user-agent': ua } }), 'create');
      eq((await request(s.base, 'GET', '/profiles', { key: s.key })).status, 200, 'list');
      eq((await request(s.base, 'DELETE', `/profiles/${p.id}`, { key: s.key, headers: { 'user-agent': ua } })).status, 204, 'delete');
      const got = await waitEntries(s, s.key, 2);
      eq(got.length, 2, `only the two changes: ${JSON.stringify(got)}`);
      const [del, create] = got; // newest first
      const kid = await keyId(s, s.key);
      eq(create.method, 'POST', 'method');
      eq(create.path, '/profiles', 'path');
      eq(create.route, '/profiles', 'route');
      eq(create.status, 200, 'status');
      eq(del.method, 'DELETE', 'method');
      eq(del.path, `/profiles/${p.id}`, 'path');
      assert(/^\/profiles\/\{[a-z_]+\}$/.test(del.route), `route is the pattern: ${del.route}`);
      eq(del.status, 204, 'status');
      for (const e of got) {
        assert(!Number.isNaN(Date.parse(e.timestamp)) && /Z$/.test(e.timestamp), `timestamp ${e.timestamp}`);
        assert(Number.isInteger(e.duration_ms) && e.duration_ms >= 0, `duration_ms ${e.duration_ms}`);
        eq(e.client_ip, '127.0.0.1', 'client_ip');
        eq(e.user_agent, ua, 'user_agent');
        eq(e.user_id, kid, 'user_id is the key id');
        eq(e.auth_strategy, 'api_key', 'auth_strategy');
        eq(e.service, 'profiles', 'service');
        eq(e.domain, `127.0.0.1:${s.port}`, 'domain: the request\'s host');
        eq(e.email, '', 'email: none (keys, no users)');
        assert(!JSON.stringify(e).includes(s.key), 'no key in an entry');
      }
    }),
  },
  {
    name: 'issue 33.7: a failed authentication is an entry of the operator\'s log (GET /admin/audit-logs), never of an organization\'s, and keeps no token or query',
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      eq((await request(s.base, 'DELETE', '/profiles/x?secret=1', { key: 'bd_wrong' })).status, 401, 'bad key');
      eq((await request(s.base, 'GET', '/browsers', { key: 'bd_wrong2' })).status, 401, 'a read with a bad key');
      const viaUrl = await request(s.base, 'GET', '/browser/sessions/abc/fs/list?jwt=forged.token.here');
      eq(viaUrl.status, 401, `a session URL with a forged token: ${viaUrl.text}`);
      const admin = { authorization: `Bearer ${ADMIN}` };
      const got = await waitFor(async () => {
        const r = await request(s.base, 'GET', `/admin/audit-logs?${WINDOW()}`, { headers: admin });
        eq(r.status, 200, r.text);
        return r.json.filter((e) => e.status === 401).length >= 3 ? r.json : null;
      }, 'three failed authentications in the operator\'s log');
      const failed = got.filter((e) => e.status === 401);
      const paths = failed.map((e) => e.path).sort();
      eq(paths, ['/browser/sessions/abc/fs/list', '/browsers', '/profiles/x'], 'paths without queries');
      eq(failed.find((e) => e.path === '/browsers').auth_strategy, 'api_key', 'strategy of a key');
      eq(failed.find((e) => e.path.startsWith('/browser/')).auth_strategy, 'session_token', 'strategy of a session URL');
      const text = JSON.stringify(got);
      for (const secret of ['bd_wrong', 'forged.token', 'secret=1', 'jwt'])
        assert(!text.includes(secret), `${secret} in the operator's log: ${text}`);
      const mine = await entries(s, s.key);
      eq(mine.json.length, 0, `the organization sees no failed authentication: ${mine.text}`);
      // An admin call that changes something is the operator's too.
      const o = await newOrg(s, ADMIN, { name: 'audited' });
      const adm = await waitFor(async () => {
        const r = await request(s.base, 'GET', `/admin/audit-logs?${WINDOW()}&auth_strategy=admin_token`, { headers: admin });
        return r.json.length >= 2 ? r.json : null;
      }, 'the admin calls');
      assert(adm.some((e) => e.method === 'POST' && e.route === '/admin/orgs'), JSON.stringify(adm));
      assert(o.key, 'org made');
    }),
  },
  {
    name: 'issue 33.7: filters method, exclude_method, service, auth_strategy, search; bad ones are 400 naming the field',
    fn: () => withServer({}, async (s) => {
      const p = ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, body: { name: 'filt' } }), 'profile');
      ok2xx(await request(s.base, 'POST', '/proxies', { key: s.key, body: { type: 'custom', name: 'px1', config: { host: 'proxy.example.com', port: 3128 } } }), 'proxy');
      eq((await request(s.base, 'DELETE', `/profiles/${p.id}`, { key: s.key })).status, 204, 'delete');
      await waitEntries(s, s.key, 3);
      const only = async (q) => (await entries(s, s.key, q)).json;
      eq((await only('&method=DELETE')).map((e) => e.method), ['DELETE'], 'method');
      eq((await only('&exclude_method=POST')).map((e) => e.method), ['DELETE'], 'exclude_method');
      eq((await only('&exclude_method[]=POST&exclude_method[]=DELETE')).length, 0, 'exclude_method[] repeated');
      eq((await only('&service=proxies')).map((e) => e.path), ['/proxies'], 'service');
      eq((await only('&search=PROFILES/')).map((e) => e.method), ['DELETE'], 'search (case-insensitive, in the path)');
      eq((await only('&auth_strategy=session_token')).length, 0, 'auth_strategy');
      eq((await only('&auth_strategy=api_key')).length, 3, 'auth_strategy');
      eq((await only('&search=204')).map((e) => e.method), ['DELETE'], 'search matches the status');
      const kid = await keyId(s, s.key);
      eq((await only(`&search=proxies&search_user_id=${kid},other`)).length, 3, 'search_user_id ORs the key into the search');
      eq((await only('&search=proxies&search_user_id=other')).map((e) => e.path), ['/proxies'], 'search_user_id of nobody');
      const bad = [
        ['/audit-logs', 'start'],
        [`/audit-logs?start=2026-01-01T00:00:00Z`, 'end'],
        [`/audit-logs?start=yesterday&end=2026-01-01T00:00:00Z`, 'start'],
        [`/audit-logs?start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z`, 'end'],
        [`/audit-logs?${WINDOW()}&method=FETCH`, 'method'],
        ['/audit-logs?start=2026-01-01T00:00:00Z&end=2026-03-01T00:00:00Z', '30 days'],
        [`/audit-logs?${WINDOW()}&limit=101`, 'limit'],
        [`/audit-logs?${WINDOW()}&auth_strategy=cookie`, 'auth_strategy'],
        [`/audit-logs?${WINDOW()}&limit=0`, 'limit'],
        [`/audit-logs?${WINDOW()}&page_token=abc`, 'page_token'],
        [`/audit-logs/export/chunk?${WINDOW()}&format=csv`, 'format'],
        [`/audit-logs/export/chunk?${WINDOW()}&cursor=1.x`, 'cursor'],
      ];
      for (const [path, field] of bad) {
        const r = await request(s.base, 'GET', path, { key: s.key });
        isError(r, 400);
        assert(r.json.message.includes(field), `${path}: message names ${field}: ${r.json.message}`);
      }
    }),
  },
  {
    name: 'issue 33.7: page-token pagination: X-Next-Page-Token until the last page, newest first, each entry once',
    fn: () => withServer({}, async (s) => {
      for (let i = 0; i < 5; i++)
        ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, body: { name: `pg${i}` } }), `profile ${i}`);
      await waitEntries(s, s.key, 5);
      const seen = [];
      let token = '';
      for (let page = 0; page < 5; page++) {
        const r = await entries(s, s.key, `&limit=2${token ? `&page_token=${encodeURIComponent(token)}` : ''}`);
        seen.push(...r.json);
        token = r.headers['x-next-page-token'];
        if (!token) break;
        eq(r.json.length, 2, 'a full page before the last');
      }
      eq(token, undefined, 'no token on the last page');
      eq(seen.length, 5, `entries: ${JSON.stringify(seen)}`);
      const ts = seen.map((e) => Date.parse(e.timestamp));
      assert(ts.every((t, i) => i === 0 || t <= ts[i - 1]), `newest first: ${ts}`);
    }),
  },
  {
    name: 'issue 33.7: GET /audit-logs/export/chunk as jsonl.gz (the default, gzip) and JSONL, newest first, X-Next-Cursor to older entries, X-Row-Count and X-Content-Sha256; export destinations stay 501 naming audit logs',
    fn: () => withServer({}, async (s) => {
      for (let i = 0; i < 3; i++)
        ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, body: { name: `ex${i}` } }), `profile ${i}`);
      await waitEntries(s, s.key, 3);
      const listed = (await entries(s, s.key)).json;
      const plain = await request(s.base, 'GET', `/audit-logs/export/chunk?${WINDOW()}&format=jsonl`, { key: s.key });
      eq(plain.status, 200, plain.text);
      const lines = plain.text.trim().split('\n').map((l) => JSON.parse(l));
      eq(lines, listed, 'the same entries as the list, newest first');
      eq(plain.headers['x-row-count'], '3', 'X-Row-Count');
      eq(plain.headers['x-has-more'], 'false', 'X-Has-More');
      eq(plain.headers['x-content-sha256'], createHash('sha256').update(plain.text).digest('hex'), 'X-Content-Sha256 of the body');
      // The gzip body (no format: jsonl.gz), read raw.
      const gz = await new Promise((resolve, reject) => {
        http.get(`${s.base}/audit-logs/export/chunk?${WINDOW()}&limit=2`,
          { headers: { authorization: `Bearer ${s.key}` } }, (res) => {
            const chunks = [];
            res.on('data', (c) => chunks.push(c));
            res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
          }).on('error', reject);
      });
      eq(gz.status, 200, 'gzip chunk');
      eq(gz.headers['content-type'], 'application/gzip', 'content type');
      eq(gz.headers['x-content-sha256'], createHash('sha256').update(gz.body).digest('hex'), 'X-Content-Sha256 of the gzip bytes');
      const first = gunzipSync(gz.body).toString().trim().split('\n').map((l) => JSON.parse(l));
      eq(first, lines.slice(0, 2), 'the two newest entries');
      eq(gz.headers['x-has-more'], 'true', 'X-Has-More');
      const cursor = gz.headers['x-next-cursor'];
      assert(cursor, 'X-Next-Cursor on a chunk with older entries after it');
      const rest = await request(s.base, 'GET', `/audit-logs/export/chunk?${WINDOW()}&format=jsonl&cursor=${encodeURIComponent(cursor)}`, { key: s.key });
      eq(rest.text.trim().split('\n').map((l) => JSON.parse(l)), lines.slice(2), 'the oldest entry');
      eq(rest.headers['x-next-cursor'], undefined, 'no cursor on the last chunk');
      for (const [method, path] of [['GET', '/audit-logs/export/destinations'], ['POST', '/audit-logs/export/destinations/d1/test']]) {
        const r = await request(s.base, method, path, { key: s.key, body: method === 'POST' ? {} : undefined });
        isError(r, 501);
        assert(r.json.message.includes('audit logs'), r.json.message);
      }
    }),
  },
  {
    name: 'issue 33.7: one organization never reads another\'s entries; a project-scoped key is refused (403)',
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      const b = await newOrg(s, ADMIN, { name: 'other-org' });
      ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, body: { name: 'mine-a' } }), 'org A change');
      ok2xx(await request(s.base, 'POST', '/profiles', { key: b.key, body: { name: 'mine-b' } }), 'org B change');
      const a = await waitEntries(s, s.key, 1, '&service=profiles');
      const bb = await waitEntries(s, b.key, 1, '&service=profiles');
      eq(a.length, 1, `org A: ${JSON.stringify(a)}`);
      eq(bb.length, 1, `org B: ${JSON.stringify(bb)}`);
      eq(a[0].user_id, await keyId(s, s.key), 'A sees its own key');
      eq(bb[0].user_id, await keyId(s, b.key), 'B sees its own key');
      const exp = await request(s.base, 'GET', `/audit-logs/export/chunk?${WINDOW()}&service=profiles&format=jsonl`, { key: b.key });
      eq(exp.text.trim().split('\n').length, 1, `B's export holds B's entry only: ${exp.text}`);
      // A key scoped to a project.
      const proj = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'p2' } }), 'project');
      const pk = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'scoped', project_id: proj.id } }), 'scoped key');
      isError(await request(s.base, 'GET', `/audit-logs?${WINDOW()}`, { key: pk.key }), 403);
    }),
  },
  {
    name: 'issue 33.7: entries older than BROWSERD_AUDIT_RETENTION_SECONDS are no longer listed and are deleted from the store',
    fn: () => withServer({ env: { BROWSERD_AUDIT_RETENTION_SECONDS: '2' } }, async (s) => {
      ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, body: { name: 'short' } }), 'change');
      await waitEntries(s, s.key, 1);
      await waitFor(async () => (await entries(s, s.key)).json.length === 0, 'the entry past the retention to leave the list');
      // The row itself (SQLite; under BROWSERD_TEST_CLUSTER the store is
      // PostgreSQL, whose prune the store contract test checks).
      if (Number(process.env.BROWSERD_TEST_CLUSTER || 0) < 2) {
        const rows = () => Number(execFileSync('sqlite3', [join(s.dir, 'browserd.db'), 'SELECT count(*) FROM audit_logs']).toString().trim());
        await waitFor(() => rows() === 0, 'the pruner to delete the entry');
      }
    }),
  },
  {
    name: 'issue 33.7: an acknowledged change is in the audit log after a clean stop (SIGTERM right after the answer) and a restart',
    fn: async () => {
      // One server on its own data folder (a restart on the same folder).
      const s = await startServer({ dataDir: mkdtempSync(join(tmpdir(), 'browserd-bb-')) });
      let s2;
      try {
        ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, body: { name: 'durable' } }), 'change');
        eq(await s.stop(), 0, 'clean exit');
        s2 = await startServer({ dataDir: s.dir });
        const got = (await entries(s2, s.key)).json;
        eq(got.map((e) => `${e.method} ${e.path}`), ['POST /profiles'], 'the entry survived the stop');
      } finally {
        if (s2) await s2.stop();
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'issue 39.3: a client whose standard error is not read never stalls requests (the access log is written off the request path), and a clean stop writes every line',
    fn: async () => {
      const s = await startServer();
      try {
        // The server's stderr pipe fills (64 KiB in the kernel, 16 KiB in
        // node) once the test stops reading it.
        s.proc.stderr.pause();
        const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
        const n = 3000;
        const tag = `q${process.pid}`;
        let done = 0;
        const all = [];
        for (let i = 0; i < n; i++)
          all.push(request(s.base, 'GET', `/nope-${tag}-${i}`, { agent }).then((r) => { eq(r.status, 404, 'status'); done++; }));
        let timer;
        const stalled = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`requests stalled: ${done} of ${n} answered with stderr unread`)), 60000); });
        await Promise.race([Promise.all(all), stalled]);
        clearTimeout(timer);
        agent.destroy();
        s.proc.stderr.resume();
        eq(await s.stop(), 0, 'clean exit');
        const lines = s.log.split('\n').filter((l) => l.includes(` /nope-${tag}-`));
        eq(lines.length, n, 'one access line per request, none lost on the clean stop');
      } finally {
        s.proc.stderr.resume();
        await s.stop();
        s.cleanup();
      }
    },
  },
];
