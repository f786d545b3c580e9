// Red team of the areas added last stop (docs/sandbox.md "Tenant fairness:
// newer areas"): what one tenant can take from the others through the audit
// log export, search and the MCP endpoint. Each test names the rule it
// checks; each failed on the binary before the fix.
import http from 'node:http';
import { setMaxListeners } from 'node:events';
import { withServer, startSite, request, newOrg, assert, eq, isError, waitFor, ok2xx } from '../blackbox/lib.mjs';

const WINDOW = () => `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}` +
  `&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;

// Every chunk of key's audit export, following X-Next-Cursor: [{bytes, rows, lines}].
async function exportAll(s, key) {
  const chunks = [];
  let cursor = '';
  for (;;) {
    const r = await request(s.base, 'GET', `/audit-logs/export/chunk?${WINDOW()}&format=jsonl&limit=10000${cursor}`, { key });
    eq(r.status, 200, `export chunk: ${r.text.slice(0, 300)}`);
    const lines = r.text.split('\n').filter(Boolean);
    chunks.push({ bytes: Buffer.byteLength(r.text), rows: Number(r.headers['x-row-count']), lines });
    if (r.headers['x-has-more'] !== 'true') return chunks;
    assert(r.headers['x-next-cursor'], 'X-Has-More: true comes with X-Next-Cursor');
    cursor = `&cursor=${encodeURIComponent(r.headers['x-next-cursor'])}`;
  }
}

// One JSON-RPC call to /mcp (sid: the Mcp-Session-Id, when any).
const rpc = (s, key, sid, method, params, id = 1, signal) => request(s.base, 'POST', '/mcp', {
  key, body: { jsonrpc: '2.0', id, method, params },
  headers: { accept: 'application/json, text/event-stream', ...(sid ? { 'mcp-session-id': sid } : {}) },
  signal,
});

async function mcpOpen(s, key) {
  const r = await rpc(s, key, null, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } });
  eq(r.status, 200, `initialize: ${r.text}`);
  assert(r.headers['mcp-session-id'], 'initialize answers an Mcp-Session-Id');
  return r.headers['mcp-session-id'];
}

// Makes n audit entries of about 3.3 KB each for key's organization: a
// 1000-byte path and a user agent of 1000 backslashes (each doubled by JSON).
async function fillAudit(s, key, n) {
  const headers = { 'user-agent': '\\'.repeat(1000) };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  try {
    for (let i = 0; i < n; i += 64) {
      await Promise.all(Array.from({ length: Math.min(64, n - i) }, (_, j) =>
        request(s.base, 'DELETE', `/profiles/${String(i + j).padStart(6, '0')}${'p'.repeat(990)}`, { key, headers, agent })));
    }
  } finally {
    agent.destroy();
  }
}

export const tests = [
  {
    name: 'audit logs: one export chunk holds at most LIM_AUDIT_CHUNK_BYTES (4 MiB) of JSON lines whatever its limit; X-Has-More and X-Next-Cursor lead to the rest, none lost or repeated',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const N = 1600;
      await fillAudit(s, s.key, N);
      const chunks = await waitFor(async () => {
        const c = await exportAll(s, s.key);
        return c.reduce((n, x) => n + x.rows, 0) >= N ? c : null;
      }, `${N} audit entries exported`, 60000, 500);
      for (const c of chunks) {
        assert(c.bytes <= 4 * 1024 * 1024, `a chunk of ${c.bytes} bytes (${c.rows} rows): at most 4 MiB`);
        eq(c.lines.length, c.rows, 'X-Row-Count counts the lines');
      }
      assert(chunks.length >= 2, `the export came in ${chunks.length} chunk(s)`);
      const paths = new Set(chunks.flatMap((c) => c.lines.map((l) => JSON.parse(l).path)));
      eq(paths.size, N, 'every entry once across the chunks');
    }),
  },
  {
    name: 'audit logs: an organization builds at most LIM_AUDIT_EXPORTS_PER_ORG (2) export chunks at once, on blocking threads (a full chunk is about 100 ms of work, once on an event thread): past it 429 with Retry-After; another organization still exports',
    timeout: 90000,
    fn: () => withServer({ args: ['--admin-token', 'adm'] }, async (s) => {
      const N = 1600;
      await fillAudit(s, s.key, N);
      await waitFor(async () => {
        const r = await request(s.base, 'GET', `/audit-logs/export/chunk?${WINDOW()}&format=jsonl&limit=10000`, { key: s.key });
        return r.status === 200 && Number(r.headers['x-row-count']) > 1000;
      }, 'a full export chunk', 60000, 500);
      const { key: other } = await newOrg(s, 'adm', { name: 'other' });
      const all = await Promise.all(Array.from({ length: 12 }, () =>
        request(s.base, 'GET', `/audit-logs/export/chunk?${WINDOW()}&limit=10000`, { key: s.key })));
      const refused = all.filter((r) => r.status === 429);
      assert(refused.length > 0, `12 chunks at once: ${all.map((r) => r.status).join()}`);
      isError(refused[0], 429, 'rate_limited');
      assert(Number(refused[0].headers['retry-after']) >= 1, `Retry-After: ${refused[0].headers['retry-after']}`);
      assert(/organization/.test(refused[0].json.message), `names the organization's share: ${refused[0].text}`);
      assert(all.some((r) => r.status === 200), 'some chunks were built');
      const theirs = await request(s.base, 'GET', `/audit-logs/export/chunk?${WINDOW()}`, { key: other });
      eq(theirs.status, 200, `another organization's export: ${theirs.text}`);
    }),
  },
  {
    name: 'search: an organization keeps at most LIM_SEARCH_STORED_PER_ORG (100) Search records; one more removes its oldest (404), never another organization\'s',
    timeout: 90000,
    fn: async () => {
      const provider = await startSite((rq, rs) => {
        const q = new URL(rq.url, 'http://x').searchParams.get('q') || '';
        rs.writeHead(200, { 'content-type': 'application/json' });
        rs.end(JSON.stringify({ results: [{ url: `https://example.com/${encodeURIComponent(q)}`, title: q, content: 'x'.repeat(2000) }] }));
      });
      const providers = [{ name: 'p', protocol: 'searxng', endpoint: `${provider.url}/` }];
      try {
        await withServer({ env: { BROWSERD_ADMIN_TOKEN: 'adm', BROWSERD_SEARCH_PROVIDERS: JSON.stringify(providers) } }, async (s) => {
          const { key: key2 } = await newOrg(s, 'adm', { name: 'other' });
          const search = async (key, q) => ok2xx(await request(s.base, 'POST', '/search', { key, body: { query: q, max_results: 1 } }), `search ${q}`).id;
          const theirs = await search(key2, 'theirs');
          const ids = [];
          for (let i = 0; i < 101; i++) ids.push(await search(s.key, `q${i}`));
          isError(await request(s.base, 'GET', `/search/${ids[0]}`, { key: s.key }), 404, 'not_found');
          eq((await request(s.base, 'GET', `/search/${ids[1]}`, { key: s.key })).status, 200, 'the second oldest is kept');
          eq((await request(s.base, 'GET', `/search/${ids[100]}`, { key: s.key })).status, 200, 'the newest is kept');
          eq((await request(s.base, 'GET', `/search/${theirs}`, { key: key2 })).status, 200, 'another organization\'s record is untouched');
        });
      } finally {
        provider.close();
      }
    },
  },
  {
    name: 'mcp: calls waiting for one busy MCP session hold at most the per-session share of the blocking threads (LIM_HTTP_BLOCKING_PER_SESSION, 8): past it 429 with Retry-After; another MCP session of the organization is still served, and DELETE /mcp is not refused by the share',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const sid = await mcpOpen(s, s.key);
      const other = await mcpOpen(s, s.key);
      const ac = new AbortController();
      setMaxListeners(32, ac.signal);
      const pending = [];
      try {
        // The first call creates the browser and then holds the MCP session
        // for up to 20 s on a promise that does not settle sooner.
        pending.push(rpc(s, s.key, sid, 'tools/call', { name: 'evaluate', arguments: { expression: 'new Promise((r) => setTimeout(r, 60000))' } }, 1, ac.signal).catch(() => null));
        await waitFor(async () => {
          const r = await request(s.base, 'GET', '/browsers', { key: s.key });
          return r.status === 200 && r.json.length === 1;
        }, 'the MCP session\'s browser', 60000, 200);
        const answered = [];
        const waiting = Array.from({ length: 12 }, (_, i) =>
          rpc(s, s.key, sid, 'tools/call', { name: 'tabs', arguments: { action: 'list' } }, 2 + i, ac.signal)
            .then((r) => { answered.push(r); }, () => null));
        pending.push(...waiting);
        const refused = await waitFor(() => {
          const got = answered.filter((r) => r.status === 429);
          return got.length ? got : null;
        }, 'a 429 for the calls past the MCP session\'s share', 15000, 100);
        assert(Number(refused[0].headers['retry-after']) >= 1, `Retry-After: ${refused[0].headers['retry-after']}`);
        const ping = await rpc(s, s.key, other, 'ping', {}, 99);
        eq(ping.status, 200, `another MCP session of the org: ${ping.text}`);
        // Ending the MCP session counts for the organization only: never
        // refused by the full share (it may wait for the calls holding it).
        const del = await request(s.base, 'DELETE', '/mcp', { key: s.key, headers: { 'mcp-session-id': sid } });
        assert(del.status === 204 || (del.json && del.json.code !== 'rate_limited'), `DELETE /mcp with the share full: ${del.status} ${del.text}`);
      } finally {
        ac.abort();
        await Promise.all(pending);
      }
    }),
  },
  {
    name: 'webdriver classic: one session relays at most LIM_WD_INFLIGHT_PER_SESSION (2) commands at once (its chromedriver runs them one at a time; each waiting one held a blocking thread and its answer buffer): past it 429 with Retry-After',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const wd = (method, path, body, signal) => request(s.base, method, `/wd/hub${path}`, { key: s.key, body, signal });
      const created = await wd('POST', '/session', { capabilities: { alwaysMatch: { browserName: 'chrome', 'browserd:options': { headless: true } } } });
      eq(created.status, 200, `new session: ${created.text}`);
      const id = created.json.value.sessionId;
      eq((await wd('POST', `/session/${id}/timeouts`, { script: 60000 })).status, 200, 'script timeout');
      const ac = new AbortController();
      setMaxListeners(32, ac.signal);
      const answered = [];
      const calls = Array.from({ length: 4 }, () =>
        wd('POST', `/session/${id}/execute/async`, { script: 'const done = arguments[arguments.length - 1]; setTimeout(() => done(1), 10000);', args: [] }, ac.signal)
          .then((r) => { answered.push(r); }, () => null));
      try {
        const refused = await waitFor(() => {
          const got = answered.filter((r) => r.status === 429);
          return got.length ? got : null;
        }, 'a 429 for the commands past the session\'s share', 15000, 100);
        assert(Number(refused[0].headers['retry-after']) >= 1, `Retry-After: ${refused[0].headers['retry-after']}`);
        eq(refused[0].json.value.error, 'unknown error', `a WebDriver error: ${refused[0].text}`);
        assert(/session/.test(refused[0].json.value.message), `the message names the session's share: ${refused[0].text}`);
      } finally {
        ac.abort();
        await Promise.all(calls);
      }
    }),
  },
];
