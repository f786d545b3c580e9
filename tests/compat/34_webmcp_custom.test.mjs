// Issue 34 (the rest of WebMCP's custom tools, docs/webmcp.md): a source up
// to the document's 8,000,000 bytes held once per namespace within byte
// budgets, and CDP-backed custom tools run in the session's sandbox with the
// REPL's helpers. Real headless Chromium, a loopback page.
import { withServer, startSite, createSession, request, assert, eq, isError, waitFor, newOrg } from '../blackbox/lib.mjs';

const goto = (s, id, url) =>
  request(s.base, 'POST', `/browsers/${id}/playwright/execute`, { key: s.key, body: { code: `await page.goto(${JSON.stringify(url)}); return page.url();` } });
const addCustom = (s, id, body) => request(s.base, 'POST', `/browsers/${id}/webmcp/custom-tools`, { key: s.key, body });
const invoke = (s, id, body) => request(s.base, 'POST', `/browsers/${id}/webmcp/invoke`, { key: s.key, body });

async function tools(s, id) {
  const r = await request(s.base, 'GET', `/browsers/${id}/webmcp/tools`, { key: s.key });
  eq(r.status, 200, `tools: ${r.text.slice(0, 400)}`);
  return r.json.tools;
}

// A page-backed source of about `bytes` bytes: a string literal of padding
// inside the expression, the tool answering its length from the page.
function bigSource(name, bytes, pattern) {
  const head = `(() => { const pad = "`;
  const tail = `"; return [{ kind: 'page', match: { url_patterns: [${JSON.stringify(pattern)}] }, tool: { name: ${JSON.stringify(name)}, description: 'A big one' },
    execute: async () => ({ pad: pad.length, title: document.title }) }]; })()`;
  return head + 'a'.repeat(bytes - head.length - tail.length) + tail;
}

const page = (site) => async (s, id) => {
  const r = await goto(s, id, `${site.url}/plain`);
  eq(r.json && r.json.success, true, `navigated: ${r.text}`);
};

function plainSite() {
  return startSite((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>plain-34c</title><p>no tools of its own</p>');
  });
}

export const tests = [
  {
    name: 'issue 34.5 WebMCP custom source up to 8,000,000 bytes: a 7.9 MB page-backed source (a string literal in the expression) is added, listed and invoked in the page; 8,000,001 bytes is 400 naming source; a session holding 16 MB of sources is refused a third one with 429 naming source (Retry-After), and deleting a tool frees its namespace\'s bytes; an organization holding 32 MB across its sessions is refused in a third session (429 naming source), while another organization is served',
    timeout: 240000,
    fn: async () => {
      const site = await plainSite();
      try {
        const ADMIN = 'webmcp-custom-admin';
        await withServer({ args: [...site.allow, '--admin-token', ADMIN] }, async (s) => {
          const id = await createSession(s);
          await page(site)(s, id);
          const pattern = 'http://127.0.0.1:*/plain*';
          const big = bigSource('big_one', 7900000, pattern);
          eq(Buffer.byteLength(big), 7900000, 'the source\'s size');
          let r = await addCustom(s, id, { namespace: 'big1', source: big });
          eq(r.status, 200, `a 7.9 MB source: ${r.text.slice(0, 400)}`);
          eq(r.json.tools.length, 1, r.text.slice(0, 400));
          eq(r.json.tools[0].kind, 'page', 'kind');
          eq(r.json.tools[0].tool.name, 'big_one', 'the tool\'s name from its tool metadata');
          const ct1 = r.json.tools[0].id;
          const listed = (await tools(s, id)).find((t) => t.tool.name === 'big_one');
          assert(listed && listed.source.custom && listed.source.custom.id === ct1, 'the big tool is listed on the matching tab');
          r = await invoke(s, id, { tool_ref: listed.tool_ref, input: {} });
          eq(r.status, 200, r.text.slice(0, 400));
          eq(r.json.status, 'completed', r.text.slice(0, 400));
          const pad = big.match(/"(a+)"/)[1].length;
          eq(JSON.stringify(r.json.output), JSON.stringify({ pad, title: 'plain-34c' }),
            'evaluated in the page with its literal whole');

          r = await addCustom(s, id, { namespace: 'over', source: bigSource('over', 8000001, pattern) });
          isError(r, 400);
          assert(/source/.test(r.json.message) && /8000000/.test(r.json.message), `over 8,000,000 bytes: ${r.text}`);

          // The session's budget: two full-size namespaces; a third is 429.
          r = await addCustom(s, id, { namespace: 'big2', source: bigSource('big_two', 7900000, pattern) });
          eq(r.status, 200, `a second 7.9 MB source: ${r.text.slice(0, 300)}`);
          r = await addCustom(s, id, { namespace: 'big3', source: bigSource('big_three', 7900000, pattern) });
          isError(r, 429);
          assert(/source/.test(r.json.message) && /session/.test(r.json.message), `the session's source budget: ${r.text}`);
          assert(r.headers['retry-after'], 'Retry-After');
          r = await request(s.base, 'DELETE', `/browsers/${id}/webmcp/custom-tools/${ct1}`, { key: s.key });
          eq(r.status, 204, r.text);
          r = await addCustom(s, id, { namespace: 'big3', source: bigSource('big_three', 7900000, pattern) });
          eq(r.status, 200, `deleting the namespace's one tool freed its bytes: ${r.text.slice(0, 300)}`);
          r = await request(s.base, 'GET', `/browsers/${id}/webmcp/custom-tools`, { key: s.key });
          eq(JSON.stringify(r.json.tools.map((t) => t.tool.name).sort()), '["big_three","big_two"]', r.text.slice(0, 300));

          // The organization's budget: 32 MB across its sessions (this one holds 15.8 MB).
          const b = await createSession(s);
          for (const ns of ['b1', 'b2']) {
            r = await addCustom(s, b, { namespace: ns, source: bigSource(ns, 7900000, pattern) });
            eq(r.status, 200, `session b's ${ns}: ${r.text.slice(0, 300)}`);
          }
          const c = await createSession(s);
          r = await addCustom(s, c, { namespace: 'c1', source: bigSource('c1', 7900000, pattern) });
          isError(r, 429);
          assert(/source/.test(r.json.message) && /organization/.test(r.json.message), `the organization's source budget: ${r.text}`);
          const other = await newOrg(s, ADMIN, { name: 'other-34c' });
          const d = await createSession(s, {}, other.key);
          r = await request(s.base, 'POST', `/browsers/${d}/webmcp/custom-tools`, { key: other.key, body: { namespace: 'd1', source: bigSource('d1', 7900000, pattern) } });
          eq(r.status, 200, `another organization is served: ${r.text.slice(0, 300)}`);
        });
      } finally {
        await site.close();
      }
    },
  },
  {
    name: 'issue 34.6 WebMCP CDP-backed custom tools: kind "cdp" is answered and listed on the matching tab; invoking runs execute in the sandboxed runner (not the page) with the REPL\'s helpers (cdp, js, pageInfo, httpGet through the session\'s egress) on the tool\'s own tab; an output over 240 KiB is status error; a throw is status error; a page-backed tool of the same batch still runs in the page; a bad kind is 400 naming source',
    timeout: 120000,
    fn: async () => {
      const site = await plainSite();
      try {
        await withServer({ args: site.allow }, async (s) => {
          const id = await createSession(s);
          await page(site)(s, id);
          const match = `match: { url_patterns: ['http://127.0.0.1:*/plain*'] }`;
          const source = `[
            { kind: 'cdp', ${match}, tool: { name: 'cdp_info', description: 'Reads the tab over CDP', inputSchema: { type: 'object' } },
              execute: async (input, ctx) => {
                const info = await pageInfo();
                const r = await cdp('Runtime.evaluate', { expression: '20 + 22', returnByValue: true });
                Promise.reject(new Error('a stray rejection does not end the runner'));
                const got = await httpGet(ctx.page_url);
                return { where: typeof document, title: await js('document.title'), url: info.url, sum: r.result.value, tab: ctx.tab_id, echo: input.x,
                  fetched: got.status === 200 && got.body.includes('plain-34c') };
              } },
            { kind: 'cdp', ${match}, tool: { name: 'cdp_big', description: 'Too much output' }, execute: async () => 'x'.repeat(241 * 1024) },
            { kind: 'cdp', ${match}, tool: { name: 'cdp_throws', description: 'Throws' }, execute: async () => { throw new Error('nope from cdp'); } },
            { kind: 'page', ${match}, tool: { name: 'in_page', description: 'In the page' }, execute: async () => ({ where: typeof document }) },
          ]`;
          let r = await addCustom(s, id, { namespace: 'cdp34', source: `[{ kind: 'shell', ${match}, tool: { name: 'x', description: 'x' }, execute() {} }]` });
          isError(r, 400);
          assert(/source/.test(r.json.message) && /kind/.test(r.json.message), `a bad kind: ${r.text}`);
          r = await addCustom(s, id, { namespace: 'cdp34', source });
          eq(r.status, 200, r.text);
          const kinds = Object.fromEntries(r.json.tools.map((t) => [t.tool.name, t.kind]));
          eq(JSON.stringify(kinds), '{"cdp_info":"cdp","cdp_big":"cdp","cdp_throws":"cdp","in_page":"page"}', `kinds: ${r.text}`);
          r = await request(s.base, 'GET', `/browsers/${id}/webmcp/custom-tools`, { key: s.key });
          eq(r.json.tools.filter((t) => t.kind === 'cdp').length, 3, `listed with kind: ${r.text}`);
          const list = await tools(s, id);
          const ref = (name) => {
            const t = list.find((x) => x.tool.name === name);
            assert(t && t.source.custom && t.source.custom.namespace === 'cdp34', `${name} listed: ${JSON.stringify(list)}`);
            return t;
          };
          const info = ref('cdp_info');
          r = await invoke(s, id, { tool_ref: info.tool_ref, input: { x: 7 } });
          eq(r.status, 200, r.text);
          eq(r.json.status, 'completed', r.text);
          eq(JSON.stringify(r.json.output), JSON.stringify({ where: 'undefined', title: 'plain-34c', url: `${site.url}/plain`, sum: 42, tab: info.source.tab_id, echo: 7, fetched: true }),
            'run outside the page, with the REPL\'s helpers on its own tab');
          r = await invoke(s, id, { tool_ref: ref('cdp_big').tool_ref, input: {} });
          eq(r.status, 200, r.text.slice(0, 300));
          eq(r.json.status, 'error', `over 240 KiB: ${r.text.slice(0, 300)}`);
          assert(/245760/.test(r.json.error_text), `names the cap: ${r.json.error_text}`);
          r = await invoke(s, id, { tool_ref: ref('cdp_throws').tool_ref, input: {} });
          eq(r.json.status, 'error', r.text);
          assert(/nope from cdp/.test(r.json.error_text), r.text);
          r = await invoke(s, id, { tool_ref: ref('in_page').tool_ref, input: {} });
          eq(JSON.stringify(r.json.output), '{"where":"object"}', `the page-backed one runs in the page: ${r.text}`);
        });
      } finally {
        await site.close();
      }
    },
  },
  {
    name: 'issue 34.7 WebMCP declarative tool in a child frame: a form without toolautosubmit in a same-origin iframe is listed with the frame and autosubmit false; invoking fills it by name in the frame and answers awaiting_submission (not a 504), the form not sent',
    timeout: 120000,
    fn: async () => {
      const site = await startSite((req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        if (req.url.startsWith('/ff'))
          res.end('<!doctype html><title>ff</title><form toolname="frame_form" tooldescription="A form in a frame" action="/sent"><input name="q" type="text"><button>go</button></form>');
        else res.end('<!doctype html><title>outer-34c</title><iframe src="/ff"></iframe>');
      });
      try {
        await withServer({ args: site.allow }, async (s) => {
          const id = await createSession(s);
          let r = await goto(s, id, `${site.url}/outer`);
          eq(r.json && r.json.success, true, r.text);
          let last = null;
          const form = await waitFor(async () => {
            last = await tools(s, id);
            return last.find((t) => t.tool.name === 'frame_form');
          }, 'the frame\'s form listed', 30000, 250).catch((e) => {
            throw new Error(`${e.message}: ${JSON.stringify(last)}`);
          });
          assert(form.source.frame && form.source.frame.url === `${site.url}/ff`, `in the frame: ${JSON.stringify(form.source)}`);
          eq(form.tool.annotations && form.tool.annotations.autosubmit, false, `autosubmit false: ${JSON.stringify(form.tool)}`);
          r = await invoke(s, id, { tool_ref: form.tool_ref, input: { q: 'blue hats' }, timeout_sec: 5 });
          eq(r.status, 200, r.text);
          eq(r.json.status, 'awaiting_submission', r.text);
          r = await request(s.base, 'POST', `/browsers/${id}/playwright/execute`, { key: s.key, body: {
            code: 'const f = page.frames().find((x) => x.url().endsWith("/ff")); return [f ? await f.inputValue("input[name=q]") : null, f ? f.url() : null];' } });
          eq(JSON.stringify(r.json.result), JSON.stringify(['blue hats', `${site.url}/ff`]), `filled in the frame, not sent: ${r.text}`);
        });
      } finally {
        await site.close();
      }
    },
  },
  {
    name: 'issue 34.8 WebMCP custom tools join a namespace (the hosted service\'s add_custom): without force_overwrite_namespace a batch of new names is added beside the namespace\'s tools (both listed and invocable, each with its own source), a name the namespace has already is 409 naming it, force replaces them all (the old ids gone); a namespace of 128 characters is accepted, 129 is 400 naming namespace; every tool_ref is at most 128 characters',
    timeout: 120000,
    fn: async () => {
      const site = await plainSite();
      try {
        await withServer({ args: site.allow }, async (s) => {
          const id = await createSession(s);
          await page(site)(s, id);
          const pattern = 'http://127.0.0.1:*/plain*';
          const src = (name, v) => `[{ kind: 'page', match: { url_patterns: [${JSON.stringify(pattern)}] }, tool: { name: ${JSON.stringify(name)}, description: 'd' }, execute: async () => ({ v: ${JSON.stringify(v)}, title: document.title }) }]`;
          const ns = 'n'.repeat(128);
          let r = await addCustom(s, id, { namespace: ns, source: src('first', 1) });
          eq(r.status, 200, `a 128-character namespace: ${r.text}`);
          const first = r.json.tools[0].id;
          r = await addCustom(s, id, { namespace: 'n'.repeat(129), source: src('x', 0) });
          isError(r, 400);
          assert(/namespace/.test(r.json.message), `129 characters: ${r.text}`);
          r = await addCustom(s, id, { namespace: ns, source: src('second', 2) });
          eq(r.status, 200, `a new name joins the namespace: ${r.text}`);
          const second = r.json.tools[0].id;
          r = await addCustom(s, id, { namespace: ns, source: src('first', 3) });
          eq(r.status, 409, `a name the namespace has: ${r.text}`);
          assert(/first/.test(r.json.message), `409 names the tool: ${r.text}`);
          r = await request(s.base, 'GET', `/browsers/${id}/webmcp/custom-tools`, { key: s.key });
          eq(JSON.stringify(r.json.tools.map((t) => t.id).sort()), JSON.stringify([first, second].sort()), `both kept: ${r.text}`);
          const list = await tools(s, id);
          for (const t of list) assert(t.tool_ref.length <= 128, `a tool_ref of at most 128 characters: ${t.tool_ref}`);
          for (const [name, v] of [['first', 1], ['second', 2]]) {
            const t = list.find((x) => x.tool.name === name);
            assert(t, `${name} listed: ${JSON.stringify(list)}`);
            r = await invoke(s, id, { tool_ref: t.tool_ref, input: {} });
            eq(r.status, 200, r.text);
            eq(r.json.output && r.json.output.v, v, `${name} runs its own batch's source: ${r.text}`);
          }
          r = await addCustom(s, id, { namespace: ns, source: src('third', 4), force_overwrite_namespace: true });
          eq(r.status, 200, r.text);
          r = await request(s.base, 'GET', `/browsers/${id}/webmcp/custom-tools`, { key: s.key });
          eq(JSON.stringify(r.json.tools.map((t) => t.tool.name)), '["third"]', `force replaced the namespace: ${r.text}`);
        });
      } finally {
        await site.close();
      }
    },
  },
];
