// Issue 37 item 2: GET /metrics, the Prometheus text exposition 0.0.4, behind
// the admin token (docs/operator.md "Metrics"). Scrapes are parsed with a real
// parser, `promtool check metrics` (Debian's prometheus package, installed by
// scripts/deps.sh --tests), and their counts must move with what the test did:
// one headless session created (a cold launch: no spares) and deleted.
import { execFileSync } from 'node:child_process';
import { withServer, request, assert, eq, isError, waitFor, createSession, deleteSession } from '../blackbox/lib.mjs';

const ADMIN = 'admin-token-for-tests';
const scrape = (s, token = ADMIN) => request(s.base, 'GET', '/metrics', { headers: { authorization: `Bearer ${token}` } });

// promtool's verdict on a scrape: its output (problems found) is empty, and
// it exits 0; a failure throws with what it printed.
function promtool(text) {
  try {
    const out = execFileSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
    eq(out.trim(), '', 'promtool check metrics found nothing to say');
  } catch (e) {
    throw new Error(`promtool check metrics failed: ${e.stdout || ''}${e.stderr || e.message}\n--- the scrape:\n${text.slice(0, 3000)}`);
  }
}

// series line (name with its labels, exactly as rendered) -> value.
function parse(text) {
  const m = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    m.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return m;
}
const v = (m, series) => m.get(series) ?? 0;

async function metrics(s) {
  const res = await scrape(s);
  eq(res.status, 200, `scrape: ${res.text}`);
  assert(/^text\/plain; version=0\.0\.4/.test(res.headers['content-type'] || ''), `content-type ${res.headers['content-type']}`);
  return res.text;
}

export const tests = [
  {
    name: 'issue 37.2: GET /metrics is 401 without the admin token, with a wrong one and with an API key; 200 with it',
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      isError(await request(s.base, 'GET', '/metrics'), 401, 'unauthorized');
      isError(await scrape(s, 'not-the-token'), 401, 'unauthorized');
      const withKey = await request(s.base, 'GET', '/metrics', { key: s.key });
      eq(withKey.status, 401, `an API key is not the admin token: ${withKey.text}`);
      const text = await metrics(s);
      promtool(text);
      assert(!text.includes(s.dir), 'no host path in the scrape');
      // The refused scrapes were counted under their route pattern, by class
      // (a request is counted when libmicrohttpd reports it completed, which
      // may come after its answer reached the client: scrape until it shows).
      const series = 'browserd_http_requests_total{method="GET",route="/metrics",code="4xx"}';
      const seen = await waitFor(async () => { const n = v(parse(await metrics(s)), series); return n >= 3 && n; },
        'the three refused scrapes counted', 10000, 50);
      eq(seen, 3, 'refused scrapes counted');
    }),
  },
  {
    name: 'issue 37.2: a scrape after creating and deleting a headless session passes promtool check metrics, and the sessions, creates (path cold), HTTP and store counts moved; no session or org id is a label',
    timeout: 120000,
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      const before = parse(await metrics(s));
      const id = await createSession(s);
      const t1 = await metrics(s);
      promtool(t1);
      const during = parse(t1);
      eq(v(during, 'browserd_sessions{state="running"}'), 1, 'one running session');
      eq(v(during, 'browserd_session_creates_total{path="cold",outcome="ok"}') - v(before, 'browserd_session_creates_total{path="cold",outcome="ok"}'), 1, 'one cold create');
      eq(v(during, 'browserd_session_create_duration_seconds_count{path="cold"}') - v(before, 'browserd_session_create_duration_seconds_count{path="cold"}'), 1, 'its latency observed');
      assert(v(during, 'browserd_session_create_duration_seconds_sum{path="cold"}') > 0, 'a create takes time');
      // A request is counted when libmicrohttpd reports it completed, which
      // may come after the client has read the answer: wait for it.
      const counted = await waitFor(async () => {
        const n = v(parse(await metrics(s)), 'browserd_http_requests_total{method="POST",route="/browsers",code="2xx"}');
        return n >= 1 ? n : 0;
      }, 'POST /browsers counted');
      eq(counted, 1, 'POST /browsers 2xx counted');
      assert(v(during, 'browserd_store_query_duration_seconds_count') > v(before, 'browserd_store_query_duration_seconds_count'), 'store queries observed');
      assert(!t1.includes(id), 'the session id is no label');
      await deleteSession(s, id);
      let after;
      await waitFor(async () => {
        after = parse(await metrics(s));
        return v(after, 'browserd_sessions{state="running"}') === 0;
      }, 'no running session after the delete', 60000);
      const t2 = await metrics(s);
      promtool(t2);
      after = parse(t2);
      const del = 'browserd_http_requests_total{method="DELETE",route="/browsers/{id}",code="2xx"}';
      await waitFor(async () => v(parse(await metrics(s)), del) >= 1, 'the DELETE counted', 10000, 50);
      eq(v(parse(await metrics(s)), del), 1, 'DELETE counted under its pattern');
      eq(v(after, 'browserd_sessions{state="starting"}'), 0, 'no create in progress');
      assert(!t2.includes(id), 'the session id is no label');
      const org = (await request(s.base, 'GET', '/org/entitlements', { key: s.key })).json;
      for (const x of [org && org.org_id, org && org.id].filter(Boolean)) assert(!t2.includes(x), 'the org id is no label');
    }),
  },
  {
    name: 'issue 37.2: BROWSERD_METRICS_LISTEN serves GET /metrics on an address of its own without the admin token (a bare port is on 127.0.0.1); the main address still asks for the token; nothing else is served there',
    fn: () => withServer({ args: ['--admin-token', ADMIN], env: { BROWSERD_METRICS_LISTEN: '0' } }, async (s) => {
      let port;
      await waitFor(() => (port = (/metrics listening on 127\.0\.0\.1:(\d+)/.exec(s.log) || [])[1]), 'the metrics listener on 127.0.0.1');
      const base = `http://127.0.0.1:${port}`;
      const res = await request(base, 'GET', '/metrics');
      eq(res.status, 200, `metrics listener: ${res.text.slice(0, 200)}`);
      promtool(res.text);
      assert(/^browserd_sessions\{state="starting"\} 0$/m.test(res.text), 'the same families');
      eq((await request(base, 'GET', '/browsers', { key: s.key })).status, 404, 'the API is not served there');
      eq((await request(base, 'GET', '/health')).status, 404, 'nor the probes');
      isError(await request(s.base, 'GET', '/metrics'), 401, 'unauthorized');
    }),
  },
  {
    name: 'issue 37.2: a pool shows in the pool gauges summed (size, available, acquired, waiters) and an acquire counts as a create by path pool; no pool id is a label',
    timeout: 120000,
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      const api = (method, path, body) => request(s.base, method, path, { key: s.key, body });
      const p = await api('POST', '/browser_pools', { name: 'metrics-pool', size: 2, headless: true, fill_rate_per_minute: 6000 });
      eq(p.status, 200, `create pool: ${p.text}`);
      let m;
      await waitFor(async () => {
        m = parse(await metrics(s));
        return v(m, 'browserd_pool_browsers{state="available"}') === 2;
      }, 'two pool browsers available', 60000, 200);
      eq(v(m, 'browserd_pool_size'), 2, 'the configured size');
      eq(v(m, 'browserd_pool_waiters'), 0, 'no waiter');
      const a = await api('POST', `/browser_pools/${p.json.id}/acquire`, {});
      eq(a.status, 200, `acquire: ${a.text}`);
      const t = await metrics(s);
      promtool(t);
      m = parse(t);
      eq(v(m, 'browserd_session_creates_total{path="pool",outcome="ok"}'), 1, 'one create by path pool');
      eq(v(m, 'browserd_session_create_duration_seconds_count{path="pool"}'), 1, 'its latency observed');
      eq(v(m, 'browserd_pool_browsers{state="acquired"}'), 1, 'one acquired');
      // A request is counted when it completes (after its last byte is sent,
      // so that its latency is whole): a scrape sent as soon as the answer
      // arrived may come first on a busy host. Wait for the count; it must be 1.
      const acq = 'browserd_http_requests_total{method="POST",route="/browser_pools/{id}/acquire",code="2xx"}';
      await waitFor(async () => v(parse(await metrics(s)), acq) >= 1, 'the acquire counted', 10000, 50);
      eq(v(parse(await metrics(s)), acq), 1, 'the acquire under its pattern');
      assert(!t.includes(p.json.id) && !t.includes('metrics-pool') && !t.includes(a.json.session_id), 'no pool or session id, no pool name');
      eq((await api('DELETE', `/browser_pools/${p.json.id}`, { force: true })).status, 204, 'pool deleted');
    }),
  },
];
