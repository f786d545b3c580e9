// Issue 34: WebMCP (KERNEL_API_NEWER.md 1.4 "Browser WebMCP", docs/webmcp.md)
// with real headless Chromium: a loopback page registers tools with
// document.modelContext; the API lists and invokes them, and custom tools
// match pages by URL pattern.
import { withServer, startSite, createSession, request, assert, eq, isError, waitFor } from '../blackbox/lib.mjs';

const PAGE_A = `<!doctype html><title>shop-34</title>
<form toolname="search_shop" tooldescription="Search the shop"><input name="q" type="text" toolparamdescription="what to look for"><button>go</button></form>
<script>
document.modelContext.registerTool({
  name: 'add_numbers', description: 'Adds two numbers',
  inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
  execute: async ({ a, b }) => ({ sum: a + b, page: document.title }),
});
document.modelContext.registerTool({ name: 'never_answers', description: 'Hangs', inputSchema: { type: 'object' }, execute: () => new Promise(() => {}) });
</script><iframe src="/frame"></iframe>`;

const FRAME = `<!doctype html><title>frame-34</title><script>
document.modelContext.registerTool({ name: 'in_frame', description: 'A frame tool', inputSchema: { type: 'object' }, execute: async () => ({ where: location.pathname }) });
</script>`;

const goto = (s, id, url) =>
  request(s.base, 'POST', `/browsers/${id}/playwright/execute`, { key: s.key, body: { code: `await page.goto(${JSON.stringify(url)}); return page.url();` } });

async function tools(s, id, q = '') {
  const r = await request(s.base, 'GET', `/browsers/${id}/webmcp/tools${q}`, { key: s.key });
  eq(r.status, 200, `tools: ${r.text.slice(0, 400)}`);
  return r.json.tools;
}

const invoke = (s, id, body) => request(s.base, 'POST', `/browsers/${id}/webmcp/invoke`, { key: s.key, body });

export const tests = [
  {
    name: 'issue 34 WebMCP: a loopback page\'s imperative, declarative and iframe tools are listed with schema and source, invoking answers the page\'s output / awaiting_submission (the form filled, not sent), a tool that never answers is 504 outcome_unknown after timeout_sec, a third call at once is 429, a tool dies with its document (404), a custom tool matches by URL pattern and its id has the hosted shape ct_ + a letter + 23 of [a-z0-9] and every tool_ref is at most 128 characters (its MCP server checks both); bad input is 400 naming the field; the REPL\'s webmcp.listTools/invokeTool; a busy tab does not stall the list',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(req.url.startsWith('/shop') ? PAGE_A : req.url.startsWith('/frame') ? FRAME : '<!doctype html><title>plain-34</title><p>no tools</p>');
      });
      try {
        await withServer({ args: site.allow }, async (s) => {
          const id = await createSession(s);
          let r = await goto(s, id, `${site.url}/shop`);
          eq(r.status, 200, r.text);
          eq(r.json.success, true, `navigated: ${r.text}`);
          // The iframe's tool may register after the page's load: polled with a bound.
          let last = null;
          let list = await waitFor(async () => {
            last = await tools(s, id);
            return last.some((t) => t.tool.name === 'in_frame') && last;
          }, 'the iframe\'s tool listed', 30000, 250).catch((e) => {
            throw new Error(`${e.message}: ${JSON.stringify(last)}`);
          });
          const add = list.find((t) => t.tool.name === 'add_numbers');
          const form = list.find((t) => t.tool.name === 'search_shop');
          assert(add && form, `both tools listed: ${JSON.stringify(list)}`);
          eq(add.tool.description, 'Adds two numbers', 'description');
          eq(JSON.stringify(add.tool.inputSchema.required), '["a","b"]', 'the imperative schema');
          eq(form.tool.inputSchema.properties.q.type, 'string', `the form's schema: ${JSON.stringify(form.tool)}`);
          eq(form.tool.annotations.autosubmit, false, 'a form without autosubmit');
          for (const t of [add, form]) {
            assert(typeof t.tool_ref === 'string' && t.tool_ref.length <= 128, `tool_ref is a string of at most 128 characters (the hosted MCP server's webmcp tool refuses longer ones): ${t.tool_ref}`);
            eq(t.source.page_url, `${site.url}/shop`, 'source.page_url');
            eq(t.source.page_title, 'shop-34', 'source.page_title');
            eq(t.source.frame, null, 'the top frame');
            assert(typeof t.source.tab_id === 'string' && t.source.window_id !== undefined, `tab and window: ${JSON.stringify(t.source)}`);
          }
          r = await invoke(s, id, { tool_ref: add.tool_ref, input: { a: 2, b: 40 } });
          eq(r.status, 200, r.text);
          eq(r.json.status, 'completed', r.text);
          eq(JSON.stringify(r.json.output), '{"sum":42,"page":"shop-34"}', 'the page\'s output');
          assert(typeof r.json.invocation_id === 'string', 'invocation_id');
          const inFrame = list.find((t) => t.tool.name === 'in_frame');
          eq(inFrame.source.page_url, `${site.url}/shop`, 'a frame\'s tool: the tab\'s URL');
          assert(inFrame.source.frame && inFrame.source.frame.url === `${site.url}/frame` && typeof inFrame.source.frame.frame_id === 'string',
            `source.frame: ${JSON.stringify(inFrame.source)}`);
          r = await invoke(s, id, { tool_ref: inFrame.tool_ref, input: {} });
          eq(JSON.stringify(r.json.output), '{"where":"/frame"}', `run in the frame: ${r.text}`);
          r = await invoke(s, id, { tool_ref: list.find((t) => t.tool.name === 'never_answers').tool_ref, input: {}, timeout_sec: 1 });
          isError(r, 504, 'outcome_unknown');
          assert(typeof r.json.invocation_id === 'string', `504 with the invocation_id: ${r.text}`);
          // Per tenant: at most 2 calls of one session run at once; a third is 429 with Retry-After.
          const hang = list.find((t) => t.tool.name === 'never_answers').tool_ref;
          const three = await Promise.all([1, 2, 3].map(() => invoke(s, id, { tool_ref: hang, input: {}, timeout_sec: 3 })));
          const limited = three.filter((x) => x.status === 429);
          eq(limited.length, 1, `one of three at once refused: ${three.map((x) => x.status)}`);
          assert(limited[0].headers['retry-after'], 'Retry-After');
          eq(three.filter((x) => x.status === 504).length, 2, 'the other two ran');
          r = await invoke(s, id, { tool_ref: form.tool_ref, input: { q: 'red shoes' } });
          eq(r.status, 200, r.text);
          eq(r.json.status, 'awaiting_submission', r.text);
          r = await request(s.base, 'POST', `/browsers/${id}/playwright/execute`, { key: s.key, body: { code: 'return [await page.inputValue("input[name=q]"), page.url()];' } });
          eq(JSON.stringify(r.json.result), JSON.stringify(['red shoes', `${site.url}/shop`]), `filled, not submitted: ${r.text}`);

          // The REPL's globals reach the same tools.
          r = await request(s.base, 'POST', `/browsers/${id}/repl`, { key: s.key, body: { code: `const t = await webmcp.listTools();
            const r = await webmcp.invokeTool(t.find((x) => x.tool.name === 'add_numbers').tool_ref, { a: 1, b: 2 });
            repl.write(t.length, r.status, JSON.stringify(r.output))` } });
          eq(r.status, 200, r.text);
          eq((r.json.content || []).map((c) => c.text).join(''), `${list.length} completed {"sum":3,"page":"shop-34"}`, `webmcp.listTools/invokeTool in the REPL: ${r.text}`);

          // Bad input: 400 naming the field; an unknown tool_ref: 404.
          r = await invoke(s, id, { input: {} });
          isError(r, 400);
          assert(/tool_ref/.test(r.json.message), `no tool_ref: ${r.text}`);
          r = await invoke(s, id, { tool_ref: add.tool_ref, input: [1] });
          isError(r, 400);
          assert(/input/.test(r.json.message), `input not an object: ${r.text}`);
          r = await invoke(s, id, { tool_ref: add.tool_ref, input: { big: 'x'.repeat(1024 * 1024) } });
          isError(r, 400);
          assert(/input/.test(r.json.message), `input over 1 MiB: ${r.text}`);
          r = await invoke(s, id, { tool_ref: add.tool_ref, input: {}, timeout_sec: 0 });
          isError(r, 400);
          assert(/timeout_sec/.test(r.json.message), `timeout_sec 0: ${r.text}`);
          r = await invoke(s, id, { tool_ref: 'bm90LWEtcmVm', input: {} });
          isError(r, 404);
          r = await request(s.base, 'GET', `/browsers/${id}/webmcp/tools?exclude_custom=maybe`, { key: s.key });
          isError(r, 400);
          assert(/exclude_custom/.test(r.json.message), `exclude_custom: ${r.text}`);

          // A custom tool, page-backed, matched by URL pattern.
          r = await request(s.base, 'POST', `/browsers/${id}/webmcp/custom-tools`, { key: s.key, body: { namespace: 'ns34', source: '[' } });
          isError(r, 400);
          assert(/source/.test(r.json.message), `a source that does not evaluate: ${r.text}`);
          r = await request(s.base, 'POST', `/browsers/${id}/webmcp/custom-tools`, { key: s.key, body: { namespace: 'bad ns', source: '[]' } });
          isError(r, 400);
          assert(/namespace/.test(r.json.message), `a bad namespace: ${r.text}`);
          const source = `[{ name: 'page_title', description: 'The page title', match: { url_patterns: ['http://127.0.0.1:*/plain*'] },
            execute: async (input) => ({ title: document.title, echo: input.x }) }]`;
          r = await request(s.base, 'POST', `/browsers/${id}/webmcp/custom-tools`, { key: s.key, body: { namespace: 'ns34', source } });
          eq(r.status, 200, r.text);
          const ct = r.json.tools[0];
          assert(/^ct_[a-z][a-z0-9]{23}$/.test(ct.id) && ct.namespace === 'ns34' && ct.tool.name === 'page_title', `custom tool: ${r.text}`);
          r = await request(s.base, 'POST', `/browsers/${id}/webmcp/custom-tools`, { key: s.key, body: { namespace: 'ns34', source } });
          eq(r.status, 409, `the namespace exists: ${r.text}`);
          r = await request(s.base, 'GET', `/browsers/${id}/webmcp/custom-tools`, { key: s.key });
          eq(r.json.tools.length, 1, r.text);
          list = await tools(s, id);
          assert(!list.some((t) => t.tool.name === 'page_title'), 'the custom tool does not match /shop');

          // Navigation: the page's tools die with their document.
          r = await goto(s, id, `${site.url}/plain`);
          eq(r.json.success, true, r.text);
          list = await tools(s, id);
          assert(!list.some((t) => ['add_numbers', 'search_shop', 'in_frame'].includes(t.tool.name)), `gone after navigation: ${JSON.stringify(list)}`);
          r = await invoke(s, id, { tool_ref: add.tool_ref, input: { a: 1, b: 1 } });
          isError(r, 404);
          const mine = list.find((t) => t.tool.name === 'page_title');
          assert(mine && mine.source.custom && mine.source.custom.id === ct.id, `the custom tool matches /plain: ${JSON.stringify(list)}`);
          eq((await tools(s, id, '?exclude_custom=true')).length, 0, 'exclude_custom');
          r = await invoke(s, id, { tool_ref: mine.tool_ref, input: { x: 7 } });
          eq(r.status, 200, r.text);
          eq(JSON.stringify(r.json.output), '{"title":"plain-34","echo":7}', `run in the page: ${r.text}`);
          r = await request(s.base, 'DELETE', `/browsers/${id}/webmcp/custom-tools/${ct.id}`, { key: s.key });
          eq(r.status, 204, r.text);
          r = await request(s.base, 'DELETE', `/browsers/${id}/webmcp/custom-tools/${ct.id}`, { key: s.key });
          isError(r, 404);
          r = await invoke(s, id, { tool_ref: mine.tool_ref, input: {} });
          isError(r, 404);

          // A tab whose main thread never yields is left out of the list (bounded per tab), not
          // a list that fails.
          r = await request(s.base, 'POST', `/browsers/${id}/playwright/execute`, { key: s.key, body: {
            code: `const p = await context.newPage(); await p.goto(${JSON.stringify(`${site.url}/shop`)}); await p.evaluate(() => { setTimeout(() => { for (;;); }, 50); }); return 1;` } });
          eq(r.json.success, true, `a busy tab opened: ${r.text}`);
          list = await tools(s, id);
          assert(Array.isArray(list), 'the list answers with a busy tab');
        });
      } finally {
        await site.close();
      }
    },
  },
];
