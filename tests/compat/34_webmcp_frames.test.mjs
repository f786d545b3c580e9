// Issue h12.1 (docs/webmcp.md): a custom tool's URL patterns also match
// nested frames, as the hosted service's document says: a tool whose pattern
// matches only an iframe's URL is listed with that frame, and a page-backed
// one runs in that frame's document (a same-origin iframe in the tab's
// process, another site's iframe in a process of its own). Real headless
// Chromium, loopback pages.
import { withServer, startSite, createSession, request, assert, eq } from '../blackbox/lib.mjs';

const html = (res, body) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(body); };

export const tests = [
  {
    name: 'issue h12.1 WebMCP custom tools match nested frames: a tool whose pattern matches only a same-origin iframe\'s URL, and one matching only another site\'s (out-of-process) iframe, are listed with that frame (frame_id, url; the iframe\'s own target for the out-of-process one) and run in that frame\'s document (its page globals, title and origin); a CDP-backed one gets the frame in its context; a top-document tool keeps frame null; every tool_ref is at most 128 characters',
    timeout: 120000,
    fn: async () => {
      const oop = await startSite((req, res) => html(res, '<!doctype html><title>oop-34f</title><script>window.where = "oop";</script><p>another site</p>'), { host: '127.0.0.2' });
      const outer = await startSite((req, res) => {
        const u = new URL(req.url, 'http://x');
        if (u.pathname === '/inner') return html(res, '<!doctype html><title>inner-34f</title><script>window.where = "inner";</script><p>same origin</p>');
        html(res, `<!doctype html><title>outer-34f</title><script>window.where = "outer";</script>
<iframe src="/inner"></iframe><iframe src="${oop.url}/oop"></iframe>`);
      });
      try {
        await withServer({ args: ['--allow-loopback', `${outer.hostport},${oop.hostport}`] }, async (s) => {
          const id = await createSession(s);
          let r = await request(s.base, 'POST', `/browsers/${id}/playwright/execute`, { key: s.key, body: { code: `await page.goto(${JSON.stringify(`${outer.url}/outer`)}); return page.frames().length;` } });
          eq(r.json && r.json.result, 3, `the page and its two iframes: ${r.text}`);
          const read = 'execute: async (input) => ({ where: window.where, title: document.title, origin: location.origin, echo: input.x })';
          const source = `[
            { match: { url_patterns: ['http://127.0.0.1:*/inner'] }, tool: { name: 'in_frame', description: 'Only the same-origin iframe' }, ${read} },
            { match: { url_patterns: ['http://127.0.0.2:*/oop*'] }, tool: { name: 'in_oop', description: 'Only the other site\\'s iframe' }, ${read} },
            { match: { url_patterns: ['http://127.0.0.1:*/outer'] }, tool: { name: 'on_top', description: 'Only the top document' }, ${read} },
            { kind: 'cdp', match: { url_patterns: ['http://127.0.0.1:*/inner'] }, tool: { name: 'cdp_frame', description: 'CDP-backed, the iframe' },
              execute: async (input, ctx) => ({ frame: ctx.frame, page_url: ctx.page_url }) },
          ]`;
          r = await request(s.base, 'POST', `/browsers/${id}/webmcp/custom-tools`, { key: s.key, body: { namespace: 'frames34', source } });
          eq(r.status, 200, r.text);
          r = await request(s.base, 'GET', `/browsers/${id}/webmcp/tools`, { key: s.key });
          eq(r.status, 200, r.text);
          const list = r.json.tools.filter((t) => t.source.custom);
          const one = (name) => {
            const hits = list.filter((t) => t.tool.name === name);
            eq(hits.length, 1, `${name} listed once: ${JSON.stringify(list)}`);
            return hits[0];
          };
          const inFrame = one('in_frame');
          const inOop = one('in_oop');
          const onTop = one('on_top');
          const cdpFrame = one('cdp_frame');
          eq(onTop.source.frame, null, 'a top-document tool has no frame');
          eq(inFrame.source.page_url, `${outer.url}/outer`, 'on the outer page\'s tab');
          assert(inFrame.source.frame && inFrame.source.frame.url === `${outer.url}/inner` && inFrame.source.frame.frame_id,
            `listed with the same-origin iframe: ${JSON.stringify(inFrame.source)}`);
          eq(inFrame.source.target_id, inFrame.source.tab_id, 'the same-origin iframe is in the tab\'s target');
          assert(inOop.source.frame && inOop.source.frame.url === `${oop.url}/oop`, `listed with the other site's iframe: ${JSON.stringify(inOop.source)}`);
          assert(inOop.source.target_id && inOop.source.target_id !== inOop.source.tab_id, `the out-of-process iframe's own target: ${JSON.stringify(inOop.source)}`);
          eq(inFrame.source.custom.namespace, 'frames34', 'source.custom');
          for (const t of [inFrame, inOop, onTop, cdpFrame]) assert(t.tool_ref.length <= 128, `tool_ref at most 128 characters: ${t.tool_ref}`);
          const call = async (t, input) => {
            const x = await request(s.base, 'POST', `/browsers/${id}/webmcp/invoke`, { key: s.key, body: { tool_ref: t.tool_ref, input } });
            eq(x.status, 200, x.text);
            eq(x.json.status, 'completed', x.text);
            return JSON.stringify(x.json.output);
          };
          eq(await call(inFrame, { x: 1 }), JSON.stringify({ where: 'inner', title: 'inner-34f', origin: outer.url, echo: 1 }), 'run in the same-origin iframe\'s document (its page world)');
          eq(await call(inOop, { x: 2 }), JSON.stringify({ where: 'oop', title: 'oop-34f', origin: oop.url, echo: 2 }), 'run in the out-of-process iframe\'s document');
          eq(await call(onTop, { x: 3 }), JSON.stringify({ where: 'outer', title: 'outer-34f', origin: outer.url, echo: 3 }), 'a top-document tool runs in the top document');
          eq(await call(cdpFrame, {}), JSON.stringify({ frame: inFrame.source.frame, page_url: `${outer.url}/outer` }), 'a CDP-backed tool gets the frame it matched');
          // The iframe navigates away: its document's tool_ref is gone (404).
          r = await request(s.base, 'POST', `/browsers/${id}/playwright/execute`, { key: s.key, body: { code: `await page.frames().find((f) => f.url().endsWith('/inner')).goto(${JSON.stringify(`${outer.url}/inner?again`)}); return 1;` } });
          eq(r.json && r.json.success, true, r.text);
          r = await request(s.base, 'POST', `/browsers/${id}/webmcp/invoke`, { key: s.key, body: { tool_ref: inFrame.tool_ref } });
          eq(r.status, 404, `the frame's old document: ${r.text}`);
        });
      } finally { oop.close(); outer.close(); }
    },
  },
];
