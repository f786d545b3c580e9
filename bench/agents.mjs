// The agent-facing tools (issue 34): the Browser REPL's first call in a
// session (Node started in the session's sandbox) and a warm call's round
// trip, and a warm call that reaches the page over DevTools; WebMCP's tools
// list on a page with 20 tools and one invocation; the same server, one
// headless session per round, a fresh request each call, wall time at the
// client. Prints a Markdown section; bench/run.sh appends it to
// docs/BENCHMARKS.md.
//   node bench/agents.mjs
import { startServer, startSite, request } from '../tests/blackbox/lib.mjs';
import { ms } from './lib.mjs';

const WARM = Number(process.env.BENCH_REPL_CALLS || 30);
const median = (a) => { const b = [...a].sort((x, y) => x - y); return b[Math.floor(b.length / 2)]; };
const p90 = (a) => { const b = [...a].sort((x, y) => x - y); return b[Math.floor(b.length * 0.9)]; };

const TOOLS = Array.from({ length: 20 }, (_, i) => `document.modelContext.registerTool({ name: 'tool_${i}', description: 'Tool ${i}',
  inputSchema: { type: 'object', properties: { a: { type: 'number' } } }, execute: async ({ a }) => ({ a, i: ${i} }) });`).join('\n');
const site = await startSite((q, r) => {
  r.setHeader('content-type', 'text/html');
  r.end(q.url === '/tools' ? `<!doctype html><title>tools</title><script>${TOOLS}</script>` : '<title>bench</title><p>bench</p>');
});
const s = await startServer({ args: site.allow });
const api = (m, p, b) => request(s.base, m, p, { key: s.key, body: b });
const rows = [];
try {
  const cold = [], warm = [], page = [], list = [], inv = [];
  for (let round = 0; round < 3; round++) {
    const b = (await api('POST', '/browsers', { headless: true, start_url: `${site.url}/` })).json;
    const call = async (code) => {
      const t0 = process.hrtime.bigint();
      const r = await api('POST', `/browsers/${b.session_id}/repl`, { code });
      if (r.status !== 200 || !r.json.success) throw new Error(`repl: ${r.status} ${r.text.slice(0, 200)}`);
      return ms(t0);
    };
    cold.push(await call('repl.write("1")'));
    for (let i = 0; i < WARM; i++) warm.push(await call('repl.write("1")'));
    for (let i = 0; i < WARM / 3; i++) page.push(await call('repl.write((await pageInfo()).title)'));
    await call(`await gotoUrl(${JSON.stringify(`${site.url}/tools`)}); repl.write("ok")`);
    for (let i = 0; i < WARM / 3; i++) {
      let t0 = process.hrtime.bigint();
      const r = await api('GET', `/browsers/${b.session_id}/webmcp/tools`);
      list.push(ms(t0));
      if (r.status !== 200 || r.json.tools.length !== 20) throw new Error(`webmcp tools: ${r.status} ${r.text.slice(0, 200)}`);
      t0 = process.hrtime.bigint();
      const v = await api('POST', `/browsers/${b.session_id}/webmcp/invoke`, { tool_ref: r.json.tools[i % 20].tool_ref, input: { a: i } });
      inv.push(ms(t0));
      if (v.status !== 200 || v.json.status !== 'completed') throw new Error(`webmcp invoke: ${v.status} ${v.text.slice(0, 200)}`);
    }
    await api('DELETE', `/browsers/${b.session_id}`);
  }
  rows.push(`| first call of a session (Node started in the sandbox), median of ${cold.length} sessions | ${median(cold).toFixed(0)} ms | max ${Math.max(...cold).toFixed(0)} ms |`);
  rows.push(`| warm call \`repl.write("1")\`, ${warm.length} calls | ${median(warm).toFixed(1)} ms | p90 ${p90(warm).toFixed(1)} ms |`);
  rows.push(`| warm call \`repl.write((await pageInfo()).title)\` (a DevTools round trip to the page), ${page.length} calls | ${median(page).toFixed(1)} ms | p90 ${p90(page).toFixed(1)} ms |`);
  rows.push(`| WebMCP: \`GET /browsers/{id}/webmcp/tools\` on a page with 20 tools, ${list.length} calls | ${median(list).toFixed(1)} ms | p90 ${p90(list).toFixed(1)} ms |`);
  rows.push(`| WebMCP: \`POST /browsers/{id}/webmcp/invoke\` of one of them, ${inv.length} calls | ${median(inv).toFixed(1)} ms | p90 ${p90(inv).toFixed(1)} ms |`);
} finally { await s.stop(); s.cleanup(); site.close(); }
console.log(['## The Browser REPL and WebMCP (issue 34)', '',
  'One server with its defaults, a headless session per round (3 rounds), `POST /browsers/{id}/repl`, then the session on a page registering 20 WebMCP tools (`node bench/agents.mjs`).', '',
  '| figure | median | spread |', '|---|---|---|', ...rows].join('\n'));
