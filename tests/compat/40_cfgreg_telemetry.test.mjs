// Issue 40 (remainder), the config registry's classification reads the
// visit's telemetry (docs/config-registry.md "Classification"): each visit
// loads and renders the target in its candidate session, and the page's
// network events (the main document's status and headers, its redirects,
// script navigations included, the sub-requests' answers) and console
// errors are signals. Pages whose main document is a 200 with ordinary text
// for every browser, and only the telemetry tells that a headless one was
// challenged: a sub-request the page needs answers 403 with a challenge
// header, or a script sends the page to /challenge.
import { startServer, startSite, request, assert, eq, waitFor } from '../blackbox/lib.mjs';

const headless = (rq) => (rq.headers['user-agent'] || '').includes('HeadlessChrome');

async function site() {
  const seen = [];
  const s = await startSite((rq, rs) => {
    seen.push(rq.url);
    const html = (body) => { rs.writeHead(200, { 'content-type': 'text/html' }); rs.end(`<!doctype html><html><body>${body}</body></html>`); };
    if (rq.url === '/app') {
      return html('<h1>Shop</h1><p id="p">Loading the catalogue</p>'
        + '<script>fetch("/api/catalogue").then((r) => r.text()).then((t) => { document.getElementById("p").textContent = t; });</script>');
    }
    if (rq.url === '/api/catalogue') {
      if (headless(rq)) {
        rs.writeHead(403, { 'content-type': 'text/plain', 'cf-mitigated': 'challenge' });
        return rs.end('');
      }
      rs.writeHead(200, { 'content-type': 'text/plain' });
      return rs.end('Ten items');
    }
    if (rq.url === '/news') {
      return html(`<h1>News</h1><p>Today's headlines</p>${headless(rq) ? '<script>location.replace("/challenge?from=news")</script>' : ''}`);
    }
    if (rq.url.startsWith('/challenge')) return html('<p>One moment please</p>');
    rs.writeHead(404); rs.end();
  });
  return { ...s, seen };
}

const post = (s, path, body) => request(s.base, 'POST', path, { key: s.key, body });

async function analyse(s, url) {
  const r = await post(s, '/config-registry/resolve', { url });
  eq(r.status, 200, r.text);
  return waitFor(async () => {
    const g = await request(s.base, 'GET', `/config-registry/analyses/${r.json.analysis.id}`, { key: s.key });
    eq(g.status, 200, g.text);
    return g.json.status !== 'running' && g.json;
  }, `analysis of ${url}`, 110000, 250);
}

export const tests = [
  {
    name: 'issue 40 telemetry: a visit whose main document is 200 is blocked when its telemetry shows a challenge: a sub-request the page needs answers 403 with cf-mitigated: challenge (challenge_request), a script redirects the page to /challenge (challenge_redirect); the recommendation is the configuration the telemetry shows admitted',
    timeout: 240000,
    fn: async () => {
      const pg = await site();
      const s = await startServer({ args: pg.allow });
      try {
        const a = await analyse(s, `${pg.url}/app`);
        eq(a.status, 'completed', JSON.stringify(a));
        const byKind = (x, h, st) => x.attempts.find((y) => y.browser.headless === h && y.browser.stealth === st);
        const plain = byKind(a, true, false), stealth = byKind(a, true, true);
        assert(plain && stealth, JSON.stringify(a.attempts));
        eq([plain.outcome, plain.reason, plain.http_status], ['blocked', 'challenge_request', 200], `the main document is 200, the telemetry tells: ${JSON.stringify(plain)}`);
        assert(plain.telemetry.failed_requests.some((f) => f.url.endsWith('/api/catalogue') && f.status === 403 && f.challenge_header), `the telemetry names the request: ${JSON.stringify(plain.telemetry)}`);
        eq([stealth.outcome, stealth.reason], ['accessed', 'ok'], JSON.stringify(stealth));
        eq(a.recommendation.browser, stealth.browser, 'the admitted configuration is recommended');
        assert(pg.seen.filter((u) => u === '/api/catalogue').length >= 2, `the pages ran their scripts: ${pg.seen}`);

        const n = await analyse(s, `${pg.url}/news`);
        const np = byKind(n, true, false), ns = byKind(n, true, true);
        eq([np.outcome, np.reason, np.http_status], ['blocked', 'challenge_redirect', 200], `a script's redirect: ${JSON.stringify(np)}`);
        assert(/\/challenge\?from=news$/.test(np.final_url), `final_url ${np.final_url}`);
        eq([ns.outcome, ns.reason], ['accessed', 'ok'], JSON.stringify(ns));
        eq([n.recommendation.evidence.accessed, n.recommendation.evidence.blocked], [2, 1], JSON.stringify(n.recommendation));
      } finally { await s.stop(); s.cleanup(); pg.close(); }
    },
  },
];
