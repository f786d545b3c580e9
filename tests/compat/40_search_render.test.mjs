// Issue 40 (remainder), search content in render mode (docs/search.md
// "content"): the result page is loaded and rendered in the caller's own
// session (its egress rules apply), the rendered DOM is converted as curl's
// body is, method browser_render; statuses ok, blocked, timeout. A page
// whose text is written by JavaScript (and by a fetch its script makes)
// shows the difference: curl mode does not see that text, render does.
// Render fetches in flight are a share per session and per organization
// (LIM_SEARCH_RENDER_INFLIGHT*): past it, 429 with Retry-After.
import { startServer, startSearchProvider, startHeldPages, request, assert, eq, isError, createSession, deleteSession, waitFor } from '../blackbox/lib.mjs';

// The pages: /js writes its text with a script and a fetch at load; /forbidden
// answers 403; /hold* is held until release().
function pages() {
  return startHeldPages((rq, rs) => {
    if (rq.url === '/js') {
      rs.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      return rs.end('<!doctype html><html><head><title>T</title></head><body><div id="x">static shell</div>'
        + '<script>document.getElementById("x").textContent = "Written by script " + (6 * 7);'
        + 'fetch("/data").then((r) => r.text()).then((t) => { const p = document.createElement("p"); p.textContent = t; document.body.appendChild(p); });'
        + '</script></body></html>');
    }
    if (rq.url === '/data') {
      rs.writeHead(200, { 'content-type': 'text/plain' });
      return rs.end('Fetched after load');
    }
    if (rq.url === '/forbidden') {
      rs.writeHead(403, { 'content-type': 'text/html' });
      return rs.end('<h1>No</h1>');
    }
    rs.writeHead(404); rs.end();
  });
}

async function withRender(fn) {
  const pg = await pages();
  const pv = await startSearchProvider();
  const s = await startServer({
    args: pg.allow,
    env: { BROWSERD_SEARCH_PROVIDERS: JSON.stringify([{ name: 'fake', protocol: 'searxng', endpoint: pv.url }]) },
  });
  let id;
  try {
    id = await createSession(s);
    await fn(s, pg, id);
  } finally {
    if (id) await deleteSession(s, id).catch(() => {});
    await s.stop(); s.cleanup(); pv.close(); pg.close();
  }
}

const search = (s, body) => request(s.base, 'POST', '/search', { key: s.key, body });
const content = (id, mode, extra = {}) => ({ source: 'browser', browser: { browser_id: id, mode }, format: 'text', ...extra });

export const tests = [
  {
    name: 'issue 40 render: content.browser.mode render loads the page in the caller\'s session: text written by script (and by a fetch at load) is in the content, which curl mode does not see; method browser_render; 403 is blocked, a target the session\'s egress refuses is blocked, a page that never answers is timeout',
    timeout: 120000,
    fn: () => withRender(async (s, pg, id) => {
      const url = `${pg.url}/js`;
      const curl = await search(s, { query: `urls:${url}`, content: content(id, 'curl') });
      eq(curl.status, 200, curl.text);
      const c0 = curl.json.results[0].content;
      eq([c0.status, c0.method], ['ok', 'browser_curl'], JSON.stringify(c0));
      assert(c0.text.includes('static shell') && !c0.text.includes('Written by script'), `curl sees the shell only: ${c0.text}`);

      const r = await search(s, { query: `urls:${url}`, content: content(id, 'render') });
      eq(r.status, 200, r.text);
      const c = r.json.results[0].content;
      eq([c.status, c.method, c.http_status, c.final_url], ['ok', 'browser_render', 200, url], JSON.stringify(c));
      assert(c.text.includes('Written by script 42'), `the script's text: ${c.text}`);
      assert(c.text.includes('Fetched after load'), `the text of the fetch at load: ${c.text}`);
      assert(!c.text.includes('static shell'), `the shell was replaced: ${c.text}`);
      eq(c.completeness, 'full', 'completeness');
      assert(!r.json.warnings.some((w) => w.code === 'render_not_supported'), `no render warning: ${JSON.stringify(r.json.warnings)}`);
      eq(r.json.usage.content_fetches, 1, 'usage');
      // The stored record replays it.
      const g = await request(s.base, 'GET', `/search/${r.json.id}`, { key: s.key });
      eq(g.json.results[0].content.method, 'browser_render', 'replayed');

      // max_chars cuts the rendered text.
      const cut = await search(s, { query: `urls:${url}`, content: content(id, 'render', { max_chars: 10 }) });
      const cc = cut.json.results[0].content;
      eq([cc.status, cc.truncated, cc.completeness, [...cc.text].length], ['ok', true, 'partial', 10], JSON.stringify(cc));

      // Statuses: the site's 403, the session's egress refusal (localhost
      // on a port not in --allow-loopback), a page that never answers.
      const refused = `http://127.0.0.2:${pg.hostport.split(':')[1]}/js`;
      const b = await search(s, { query: `urls:${pg.url}/forbidden ${refused}`, content: content(id, 'render') });
      eq(b.status, 200, b.text);
      eq(b.json.results.map((x) => [x.content.status, x.content.method]), [['blocked', 'browser_render'], ['blocked', 'browser_render']], JSON.stringify(b.json.results));
      eq(b.json.results[0].content.http_status, 403, '403');
      const t = await search(s, { query: `urls:${pg.url}/hold`, content: content(id, 'render', { timeout_ms: 1000 }) });
      eq(t.status, 200, t.text);
      eq([t.json.results[0].content.status, t.json.results[0].content.method], ['timeout', 'browser_render'], JSON.stringify(t.json.results[0]));
      pg.release();
      // The render pages were hidden targets, closed after: the session's own page list is unchanged.
      const l = await waitFor(async () => {
        const x = await request(s.base, 'GET', `/browsers/${id}`, { key: s.key });
        return x.status === 200 && x.json;
      }, 'the session record');
      assert(l.session_id === id, 'session still there');
    }),
  },
  {
    name: 'issue 40 render: render fetches in flight are a per-session share (LIM_SEARCH_RENDER_INFLIGHT_PER_SESSION 2): a third render search on the session while two render held pages is 429 with Retry-After naming the share, a curl search is not counted, and the units come back',
    timeout: 120000,
    fn: () => withRender(async (s, pg, id) => {
      const held = (n) => search(s, { query: `urls:${pg.url}/hold${n}`, content: content(id, 'render', { timeout_ms: 30000 }) });
      const a = held(1), b = held(2);
      await waitFor(() => pg.held.length >= 2, 'two pages held by render searches', 60000);
      const c = await search(s, { query: `urls:${pg.url}/js`, content: content(id, 'render') });
      isError(c, 429, 'rate_limited');
      assert(Number(c.headers['retry-after']) > 0, `Retry-After ${c.headers['retry-after']}`);
      assert(/render/.test(c.json.message), `names the share: ${c.text}`);
      const d = await search(s, { query: `urls:${pg.url}/js`, content: content(id, 'curl') });
      eq([d.status, d.json.results[0].content.status], [200, 'ok'], d.text);
      pg.release();
      const [ra, rb] = await Promise.all([a, b]);
      eq([ra.status, rb.status], [200, 200], `${ra.text} ${rb.text}`);
      eq([ra.json.results[0].content.status, rb.json.results[0].content.status], ['ok', 'ok'], `${ra.text} ${rb.text}`);
      const e = await search(s, { query: `urls:${pg.url}/js`, content: content(id, 'render') });
      eq([e.status, e.json.results[0].content.status], [200, 'ok'], e.text);
    }),
  },
];
