// Issue 40 item 1: search, self-hosted (KERNEL_API_NEWER.md 1.4 "Search";
// docs/search.md). Fake SearXNG providers on loopback (the operator names
// them in BROWSERD_SEARCH_PROVIDERS), the Search record and its replay by id
// (one organization only), the strategy's fallback and attempts, result
// content fetched through the caller's headless session from loopback pages
// (markdown, text, max_chars), and 400s naming the field.
import { startServer, startSite, request, assert, eq, isError, newOrg, createSession, deleteSession, waitFor } from '../blackbox/lib.mjs';

// A SearXNG JSON API (GET /search?q=&format=json) whose results point at
// pages of site. q "fail" answers 500, q "nothing" an empty list.
// q "hang" is held until release(); q "url:<u>" answers one result, u.
async function fakeSearxng(label, pagesUrl) {
  const seen = [];
  const held = [];
  const site = await startSite((rq, rs) => {
    const u = new URL(rq.url, 'http://x');
    seen.push({ path: u.pathname, q: u.searchParams.get('q'), format: u.searchParams.get('format'), auth: rq.headers.authorization });
    const q = u.searchParams.get('q') || '';
    if (u.pathname !== '/base/search' || u.searchParams.get('format') !== 'json') { rs.writeHead(404); return rs.end(); }
    if (q === 'fail') { rs.writeHead(500, { 'content-type': 'text/plain' }); return rs.end('upstream broke'); }
    if (q === 'hang') { held.push(rs); return; }
    if (q.startsWith('url:')) {
      rs.writeHead(200, { 'content-type': 'application/json' });
      return rs.end(JSON.stringify({ results: [{ url: q.slice(4), title: 'one', content: 'one' }] }));
    }
    const results = q === 'nothing' ? [] : [
      { url: `${pagesUrl}/article`, title: `${label} article`, content: `${label} snippet for ${q}`, publishedDate: '2026-01-02T00:00:00' },
      { url: `${pagesUrl}/long`, title: `${label} long`, content: 'long page' },
      { url: 'https://other.example/x', title: 'elsewhere', content: 'x' },
      { url: 'javascript:alert(1)', title: 'not a web page', content: 'dropped' },
    ];
    rs.writeHead(200, { 'content-type': 'application/json' });
    rs.end(JSON.stringify({ query: q, results }));
  });
  const release = () => { for (const rs of held.splice(0)) rs.end(JSON.stringify({ results: [] })); };
  return { ...site, seen, held, release, close: () => { release(); site.close(); } };
}

// A Brave Search API (GET /res/v1/web/search?q=, X-Subscription-Token).
async function fakeBrave(token, pagesUrl) {
  const seen = [];
  const site = await startSite((rq, rs) => {
    const u = new URL(rq.url, 'http://x');
    seen.push({ path: u.pathname, q: u.searchParams.get('q'), count: u.searchParams.get('count'), token: rq.headers['x-subscription-token'] });
    if (u.pathname !== '/res/v1/web/search') { rs.writeHead(404); return rs.end(); }
    if (rq.headers['x-subscription-token'] !== token) { rs.writeHead(401); return rs.end('{}'); }
    rs.writeHead(200, { 'content-type': 'application/json' });
    rs.end(JSON.stringify({ type: 'search', web: { results: [
      { url: `${pagesUrl}/article`, title: 'brave article', description: 'brave description', page_age: '2026-02-03' },
    ] } }));
  });
  return { ...site, seen };
}

// The pages results point at (reached by the browser: --allow-loopback).
function pages() {
  return startSite((rq, rs) => {
    if (rq.url === '/article') {
      rs.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      return rs.end('<!doctype html><html><head><title>T</title><script>var hidden = 1;</script><style>p{}</style></head>'
        + '<body><h1>Main Title</h1><p>First &amp; only paragraph.</p>'
        + '<p>See <a href="/next?a=1&amp;b=2">the next page</a> now.</p><ul><li>one</li><li>two</li></ul></body></html>');
    }
    if (rq.url === '/long') {
      rs.writeHead(200, { 'content-type': 'text/html' });
      return rs.end(`<p>${'word '.repeat(2000)}</p>`);
    }
    rs.writeHead(404); rs.end();
  });
}

async function withSearch(fn, { sessions = false } = {}) {
  const pg = await pages();
  const a = await fakeSearxng('alpha', pg.url);
  const b = await fakeSearxng('beta', pg.url);
  const providers = [
    { name: 'alpha', protocol: 'searxng', endpoint: `${a.url}/base/`, key: 'alpha-secret' },
    { name: 'beta', protocol: 'searxng', endpoint: `${b.url}/base` },
  ];
  const s = await startServer({
    args: sessions ? pg.allow : [],
    env: { BROWSERD_ADMIN_TOKEN: 'adm', BROWSERD_SEARCH_PROVIDERS: JSON.stringify(providers) },
  });
  try { await fn(s, { a, b, pg }); } finally { await s.stop(); s.cleanup(); a.close(); b.close(); pg.close(); }
}

const search = (s, body, key = s.key) => request(s.base, 'POST', '/search', { key, body });

export const tests = [
  {
    name: 'issue 40.1: POST /search asks the configured SearXNG provider and answers the Search record (srch_ id, ranked results, attempts, usage, expires_at +24 h)',
    timeout: 30000,
    fn: () => withSearch(async (s, { a }) => {
      const r = await search(s, { query: 'hello world', max_results: 5 });
      eq(r.status, 200, r.text);
      const x = r.json;
      assert(/^srch_/.test(x.id), `id ${x.id}`);
      eq(x.provider, 'alpha', 'the first configured provider answers under auto');
      eq(x.query, 'hello world', 'query');
      eq(x.results.length, 3, `http(s) results only: ${JSON.stringify(x.results)}`);
      eq(x.results.map((y) => y.rank).join(','), '1,2,3', 'ranks');
      eq(x.results[0].title, 'alpha article', 'title');
      eq(x.results[0].snippet, 'alpha snippet for hello world', 'snippet');
      eq(x.results[0].published_date, '2026-01-02T00:00:00', 'published_date');
      assert(x.results.every((y) => typeof y.id === 'string' && y.id.length > 0), 'result ids');
      eq(x.attempts.length, 1, 'one attempt');
      eq(x.attempts[0].provider, 'alpha', 'attempt provider');
      eq(x.attempts[0].outcome, 'success', 'attempt outcome');
      assert(Number.isInteger(x.attempts[0].duration_ms), 'duration_ms');
      eq(x.usage.results_count, 3, 'usage.results_count');
      eq(x.usage.content_fetches, 0, 'usage.content_fetches');
      assert(Array.isArray(x.warnings), 'warnings');
      const ttl = Date.parse(x.expires_at) - Date.now();
      assert(ttl > 23.9 * 3600e3 && ttl <= 24 * 3600e3 + 60e3, `expires_at ${x.expires_at}`);
      // The provider got the query as SearXNG's JSON API, with the operator's key.
      const got = a.seen.find((y) => y.q === 'hello world');
      assert(got && got.path === '/base/search' && got.format === 'json', `provider request ${JSON.stringify(a.seen)}`);
      eq(got.auth, 'Bearer alpha-secret', 'the key as a bearer token');
      // max_results and domain filters.
      const one = await search(s, { query: 'q', max_results: 1 });
      eq(one.json.results.length, 1, 'max_results 1');
      const ex = await search(s, { query: 'q', exclude_domains: ['other.example'] });
      assert(ex.json.results.every((y) => !y.url.includes('other.example')), 'exclude_domains');
      const inc = await search(s, { query: 'q', include_domains: ['example'] });
      eq(inc.json.results.map((y) => y.url).join(), 'https://other.example/x', 'include_domains');
    }),
  },
  {
    name: 'issue 40.1: GET /search/{id} replays the stored record; another organization\'s key gets 404; GET /search/providers lists the providers',
    timeout: 30000,
    fn: () => withSearch(async (s) => {
      const r = await search(s, { query: 'replay me' });
      eq(r.status, 200, r.text);
      const g = await request(s.base, 'GET', `/search/${r.json.id}`, { key: s.key });
      eq(g.status, 200, g.text);
      eq(JSON.stringify(g.json), JSON.stringify(r.json), 'the same record');
      const other = await newOrg(s, 'adm', { name: 'other-org' });
      isError(await request(s.base, 'GET', `/search/${r.json.id}`, { key: other.key }), 404, 'not_found');
      isError(await request(s.base, 'GET', '/search/srch_nosuch', { key: s.key }), 404, 'not_found');
      const p = await request(s.base, 'GET', '/search/providers', { key: s.key });
      eq(p.status, 200, p.text);
      eq(p.json.providers.map((y) => `${y.name}:${y.protocol}`).join(), 'alpha:searxng,beta:searxng', 'providers');
      assert(!p.text.includes('alpha-secret'), 'no key in the list');
      assert(p.json.providers.every((y) => typeof y.capabilities === 'object'), 'capabilities');
      isError(await request(s.base, 'POST', `/search/${r.json.id}/contents`, { key: s.key, body: {} }), 404);
    }),
  },
  {
    name: 'issue 40.1: strategy fallback moves to the second provider when the first errors; pinned on an erroring provider is a 502 with its attempt; fallback_on empty',
    timeout: 30000,
    fn: () => withSearch(async (s, { b }) => {
      // q "fail": both fakes answer 500; beta is asked only after alpha's error.
      const r = await search(s, { query: 'fail', strategy: { type: 'fallback', providers: ['alpha', 'beta'] } });
      eq(r.status, 502, `both fail on "fail": ${r.text}`);
      eq(r.json.attempts.map((y) => `${y.provider}:${y.outcome}:${y.error_code}:${y.retryable}`).join(),
        'alpha:error:http_500:true,beta:error:http_500:true', 'attempts');
      const before = b.seen.length;
      const f = await search(s, { query: 'nothing', strategy: { type: 'fallback', providers: ['alpha', 'beta'], fallback_on: ['empty'] } });
      eq(f.status, 200, f.text);
      eq(f.json.attempts.map((y) => `${y.provider}:${y.outcome}`).join(), 'alpha:empty,beta:empty', 'empty falls back');
      eq(b.seen.length, before + 1, 'beta was asked');
      const ok = await search(s, { query: 'fine', strategy: { type: 'fallback', providers: ['alpha', 'beta'] } });
      eq(ok.json.attempts.length, 1, 'no fallback after a success');
      const pin = await search(s, { query: 'fail', strategy: { type: 'pinned', providers: ['beta'] } });
      eq(pin.status, 502, pin.text);
      eq(pin.json.attempts.length, 1, 'pinned: one attempt');
      eq(pin.json.attempts[0].provider, 'beta', 'pinned provider');
      // A provider that does not answer within timeout_ms is an attempt timeout.
      const slow = await search(s, { query: 'hang', timeout_ms: 1000, strategy: { type: 'fallback', providers: ['alpha', 'beta'], fallback_on: ['timeout'] } });
      eq(slow.status, 504, slow.text);
      eq(slow.json.attempts.map((y) => `${y.provider}:${y.outcome}:${y.error_code}`).join(), 'alpha:timeout:timeout,beta:timeout:timeout', 'timeouts');
    }),
  },
  {
    name: 'issue 40.1: fallback to a second provider when the first is down (connection refused): the record names the provider that answered',
    timeout: 30000,
    fn: async () => {
      const pg = await pages();
      const b = await fakeSearxng('beta', pg.url);
      const dead = await startSite((rq, rs) => rs.end());
      const deadUrl = dead.url;
      dead.close(); // nothing listens there any more: connections are refused
      const providers = [
        { name: 'down', protocol: 'searxng', endpoint: `${deadUrl}/base` },
        { name: 'beta', protocol: 'searxng', endpoint: `${b.url}/base` },
      ];
      const s = await startServer({ env: { BROWSERD_SEARCH_PROVIDERS: JSON.stringify(providers) } });
      try {
        const r = await search(s, { query: 'anything', strategy: { type: 'fallback', providers: ['down', 'beta'], fallback_on: ['error', 'timeout'] } });
        eq(r.status, 200, r.text);
        eq(r.json.provider, 'beta', 'the second provider answered');
        eq(r.json.attempts.map((y) => `${y.provider}:${y.outcome}`).join(), 'down:error,beta:success', 'attempts');
        eq(r.json.attempts[0].retryable, true, 'a refused connection may be retried');
        eq(r.json.results[0].title, 'beta article', 'beta\'s results');
      } finally { await s.stop(); s.cleanup(); b.close(); pg.close(); }
    },
  },
  {
    name: 'issue 40.1: bad input is a 400 naming the field (query, max_results, strategy, content); an unknown provider is a 400; features.search off is a 403',
    timeout: 30000,
    fn: () => withSearch(async (s) => {
      const bad = async (body, field) => {
        const r = await search(s, body);
        eq(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        assert(r.text.includes(field), `${JSON.stringify(body)} names ${field}: ${r.text}`);
      };
      await bad({}, 'query');
      await bad({ query: '' }, 'query');
      await bad({ query: 'x', max_results: 0 }, 'max_results');
      await bad({ query: 'x', max_results: 101 }, 'max_results');
      await bad({ query: 'x', strategy: { type: 'random' } }, 'strategy.type');
      await bad({ query: 'x', strategy: { type: 'fallback', providers: ['alpha', 'nosuch'] } }, 'strategy.providers');
      await bad({ query: 'x', strategy: { type: 'pinned', providers: ['alpha', 'beta'] } }, 'strategy.providers');
      await bad({ query: 'x', strategy: { type: 'fallback', providers: ['alpha'], fallback_on: ['never'] } }, 'strategy.fallback_on');
      await bad({ query: 'x', content: { format: 'pdf', browser: { browser_id: 'x' } } }, 'content.format');
      await bad({ query: 'x', content: true }, 'content.browser.browser_id');
      await bad({ query: 'x', content: { browser: { browser_id: 'nosuch' } } }, 'content.browser.browser_id');
      await bad({ query: 'x', content: { max_chars: 0, browser: { browser_id: 'x' } } }, 'content.max_chars');
      const off = await newOrg(s, 'adm', { name: 'no-search', overrides: { features: { search: { enabled: false } } } });
      isError(await search(s, { query: 'x' }, off.key), 403);
    }),
  },
  {
    name: 'issue 40.1: content is fetched through the caller\'s headless session from loopback pages: markdown (heading, link, paragraphs, list), text, max_chars truncation',
    timeout: 90000,
    fn: () => withSearch(async (s) => {
      const id = await createSession(s);
      try {
        const md = await search(s, { query: 'pages', max_results: 2, content: { source: 'browser', browser: { browser_id: id, mode: 'curl' }, format: 'markdown', max_chars: 5000 } });
        eq(md.status, 200, md.text);
        eq(md.json.usage.content_fetches, 2, 'two fetches');
        const c = md.json.results[0].content;
        eq(c.status, 'ok', JSON.stringify(c));
        eq(c.method, 'browser_curl', 'method');
        eq(c.http_status, 200, 'http_status');
        eq(c.truncated, false, 'not truncated');
        assert(c.text.startsWith('# Main Title'), `heading: ${c.text}`);
        assert(c.text.includes('First & only paragraph.'), `entities decoded: ${c.text}`);
        assert(c.text.includes('[the next page](/next?a=1&b=2)'), `link: ${c.text}`);
        assert(c.text.includes('- one\n- two'), `list: ${c.text}`);
        assert(/paragraph\.\n\nSee/.test(c.text), `paragraphs: ${JSON.stringify(c.text)}`);
        assert(!c.text.includes('hidden') && !c.text.includes('p{}'), `no script or style: ${c.text}`);
        const long = md.json.results[1].content;
        eq(long.status, 'ok', JSON.stringify(long).slice(0, 200));
        eq(long.truncated, true, 'the long page is cut');
        const n = [...long.text].length;
        assert(n <= 5000 && n > 4990, `max_chars 5000: ${n} characters`);
        const tx = await search(s, { query: 'pages', max_results: 1, content: { browser: { browser_id: id }, format: 'text', max_chars: 30 } });
        eq(tx.status, 200, tx.text);
        const t = tx.json.results[0].content;
        eq(t.text, 'Main Title\n\nFirst & only parag', 'text, cut at 30 characters');
        eq(t.truncated, true, 'truncated');
        // The stored record carries the content too.
        const g = await request(s.base, 'GET', `/search/${tx.json.id}`, { key: s.key });
        eq(g.json.results[0].content.text, t.text, 'replayed content');
      } finally { await deleteSession(s, id); }
    }, { sessions: true }),
  },
  {
    name: 'issue 40.1: a BROWSERD_SEARCH_PROVIDERS mistake is a 503 naming the entry and the rule, never the key; none configured is a 503',
    timeout: 30000,
    fn: async () => {
      const bad = [{ name: 'x', protocol: 'gopher', endpoint: 'http://127.0.0.1:9', key: 'sekret-key' }];
      const s = await startServer({ env: { BROWSERD_SEARCH_PROVIDERS: JSON.stringify(bad) } });
      try {
        const r = await search(s, { query: 'x' });
        isError(r, 503);
        assert(r.json.message.includes('BROWSERD_SEARCH_PROVIDERS[0]') && r.json.message.includes('protocol'), r.text);
        assert(!r.text.includes('sekret'), 'no key');
      } finally { await s.stop(); s.cleanup(); }
      const none = await startServer({ env: { BROWSERD_SEARCH_PROVIDERS: '' } });
      try {
        isError(await search(none, { query: 'x' }), 503);
        eq((await request(none.base, 'GET', '/search/providers', { key: none.key })).json.providers.length, 0, 'no providers');
      } finally { await none.stop(); none.cleanup(); }
    },
  },
  {
    name: 'issue 40.1: the brave protocol: GET /res/v1/web/search with X-Subscription-Token from key_env; a wrong key is an attempt error http_401',
    timeout: 30000,
    fn: async () => {
      const pg = await pages();
      const br = await fakeBrave('brave-token', pg.url);
      const providers = [
        { name: 'brave', protocol: 'brave', endpoint: br.url, key_env: 'TEST_BRAVE_KEY' },
        { name: 'brave-bad', protocol: 'brave', endpoint: br.url, key: 'wrong' },
      ];
      const s = await startServer({ env: { TEST_BRAVE_KEY: 'brave-token', BROWSERD_SEARCH_PROVIDERS: JSON.stringify(providers) } });
      try {
        const r = await search(s, { query: 'brave query', max_results: 50 });
        eq(r.status, 200, r.text);
        eq(r.json.provider, 'brave', 'provider');
        eq(r.json.results[0].title, 'brave article', 'title');
        eq(r.json.results[0].snippet, 'brave description', 'description as the snippet');
        eq(r.json.results[0].published_date, '2026-02-03', 'page_age as published_date');
        const got = br.seen.find((y) => y.q === 'brave query');
        assert(got && got.token === 'brave-token' && got.count === '20', `request ${JSON.stringify(br.seen)}`);
        const bad = await search(s, { query: 'x', strategy: { type: 'pinned', providers: ['brave-bad'] } });
        eq(bad.status, 502, bad.text);
        eq(`${bad.json.attempts[0].error_code}:${bad.json.attempts[0].retryable}`, 'http_401:false', 'a refused key is not retryable');
        assert(!bad.text.includes('wrong') && !bad.text.includes('brave-token'), 'no key in the answer');
      } finally { await s.stop(); s.cleanup(); br.close(); pg.close(); }
    },
  },
  {
    name: 'issue 40.1: provider calls are capped per organization: the 5th search in flight is a 429 with Retry-After while another organization still searches',
    timeout: 40000,
    fn: () => withSearch(async (s, { a }) => {
      const hung = [1, 2, 3, 4].map(() => search(s, { query: 'hang', strategy: { type: 'pinned', providers: ['alpha'] }, timeout_ms: 30000 }));
      await waitFor(() => a.held.length === 4, 'four provider calls held');
      const over = await search(s, { query: 'x' });
      isError(over, 429);
      assert(Number(over.headers['retry-after']) >= 1, `Retry-After ${over.headers['retry-after']}`);
      const other = await newOrg(s, 'adm', { name: 'second-org' });
      eq((await search(s, { query: 'x' }, other.key)).status, 200, 'another organization is not held up');
      a.release();
      for (const r of await Promise.all(hung)) eq(r.status, 200, r.text);
      eq((await search(s, { query: 'x' })).status, 200, 'the share is given back');
    }),
  },
  {
    name: 'issue 40.1: content of a page the session\'s network rules refuse is blocked, of a page that is not found unavailable; the search still answers; an ended session is a 409',
    timeout: 90000,
    fn: () => withSearch(async (s, { pg }) => {
      const closed = await startSite((rq, rs) => rs.end('<p>secret</p>')); // not in --allow-loopback
      const id = await createSession(s);
      try {
        const r = await search(s, { query: `url:${closed.url}/x`, content: { browser: { browser_id: id } } });
        eq(r.status, 200, r.text);
        const c = r.json.results[0].content;
        eq(c.status, 'blocked', JSON.stringify(c));
        assert(!c.text, 'no text');
        const nf = await search(s, { query: `url:${pg.url}/missing`, content: { browser: { browser_id: id } } });
        eq(nf.json.results[0].content.status, 'unavailable', JSON.stringify(nf.json.results[0].content));
        eq(nf.json.results[0].content.http_status, 404, 'http_status');
      } finally { await deleteSession(s, id); closed.close(); }
      // An ended session fetches nothing: 409 before any provider is asked.
      isError(await search(s, { query: 'x', content: { browser: { browser_id: id } } }), 409, 'session_ended');
    }, { sessions: true }),
  },
];
