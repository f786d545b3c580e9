// Issue 37 item 6: the MCP endpoint at /mcp (docs/mcp.md), driven by the
// official MCP client (@modelcontextprotocol/sdk, Streamable HTTP, the API
// key as bearer): a small task on a loopback page through its tools, one
// browser session per MCP session ended with it, another organization's key
// refused on the MCP session, and the per-organization cap (429).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { withServer, startSite, request, newOrg, assert, eq, waitFor } from '../blackbox/lib.mjs';

const PAGE = `<!doctype html><title>mcp task</title>
<button id="b" onclick="document.getElementById('out').textContent='clicked'">Press me</button>
<label>Name <input id="name"></label>
<p id="out">waiting</p>`;

async function connect(s, key) {
  const client = new Client({ name: 'browserd-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${s.base}/mcp`),
    { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
  await client.connect(transport);
  return { client, transport };
}

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const activeSessions = async (s, key) => {
  const r = await request(s.base, 'GET', '/browsers', { key });
  eq(r.status, 200, `list: ${r.text}`);
  return r.json.map((b) => b.session_id);
};

export const tests = [
  {
    name: 'issue 37.6: an MCP client navigates, snapshots a ref, clicks and types by ref, evaluates, takes a screenshot; DELETE /mcp ends its browser; another org cannot use the MCP session',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(PAGE); });
      try {
        await withServer({ args: [...site.allow, '--admin-token', 'adm'] }, async (s) => {
          const { client, transport } = await connect(s, s.key);
          const names = (await client.listTools()).tools.map((t) => t.name);
          for (const n of ['navigate', 'snapshot', 'click', 'type', 'press_key', 'screenshot', 'evaluate', 'tabs', 'live_view_url', 'files'])
            assert(names.includes(n), `tools/list lacks ${n}: ${names}`);
          eq((await activeSessions(s, s.key)).length, 0, 'no browser before the first tool call');

          const nav = await client.callTool({ name: 'navigate', arguments: { url: `${site.url}/` } });
          assert(!nav.isError, `navigate: ${text(nav)}`);
          const browsers = await activeSessions(s, s.key);
          eq(browsers.length, 1, 'one browser session for the MCP session');

          const snap = text(await client.callTool({ name: 'snapshot', arguments: {} }));
          const button = /button "Press me" \[ref=(\d+)\]/.exec(snap);
          assert(button, `the snapshot names the button with a ref:\n${snap}`);
          const box = /textbox "Name" \[ref=(\d+)\]/.exec(snap);
          assert(box, `the snapshot names the text box with a ref:\n${snap}`);

          const click = await client.callTool({ name: 'click', arguments: { ref: Number(button[1]) } });
          assert(!click.isError, `click: ${text(click)}`);
          const typed = await client.callTool({ name: 'type', arguments: { ref: box[1], text: 'Ada' } });
          assert(!typed.isError, `type: ${text(typed)}`);
          const ev = await client.callTool({ name: 'evaluate',
            arguments: { expression: "[document.getElementById('out').textContent, document.getElementById('name').value]" } });
          eq(JSON.parse(text(ev)), ['clicked', 'Ada'], 'the page changed after click and type');

          const thrown = await client.callTool({ name: 'evaluate', arguments: { expression: 'throw new Error("boom")' } });
          assert(thrown.isError === true && /boom/.test(text(thrown)), `a tool failure is isError: ${JSON.stringify(thrown)}`);

          const shot = await client.callTool({ name: 'screenshot', arguments: {} });
          const img = shot.content.find((c) => c.type === 'image');
          assert(img && img.mimeType === 'image/png', `an image part: ${JSON.stringify(shot).slice(0, 200)}`);
          eq(Buffer.from(img.data, 'base64').subarray(1, 4).toString(), 'PNG', 'base64 PNG');

          const sid = transport.sessionId;
          assert(/^mcp_/.test(sid), `Mcp-Session-Id issued at initialize: ${sid}`);
          // Another organization's key: the MCP session id is not found for it.
          const other = await newOrg(s, 'adm', { name: 'other' });
          const stolen = await request(s.base, 'POST', '/mcp', {
            key: other.key,
            headers: { 'mcp-session-id': sid, accept: 'application/json, text/event-stream' },
            body: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'evaluate', arguments: { expression: '1' } } },
          });
          eq(stolen.status, 404, `another org's key on the MCP session: ${stolen.text}`);
          const del = await request(s.base, 'DELETE', '/mcp', { key: other.key, headers: { 'mcp-session-id': sid } });
          eq(del.status, 404, `another org's key cannot end it: ${del.text}`);
          eq((await activeSessions(s, s.key)).length, 1, 'the browser still runs');

          await transport.terminateSession();
          await client.close();
          await waitFor(async () => (await activeSessions(s, s.key)).length === 0, 'the browser session ended with the MCP session', 30000);
          const gone = await request(s.base, 'POST', '/mcp', {
            key: s.key,
            headers: { 'mcp-session-id': sid, accept: 'application/json, text/event-stream' },
            body: { jsonrpc: '2.0', id: 8, method: 'tools/list' },
          });
          eq(gone.status, 404, `an ended MCP session: ${gone.text}`);
        });
      } finally {
        site.close();
      }
    },
  },
  {
    name: 'issue 37.6: MCP sessions per organization are capped (429 with Retry-After); GET /mcp is 405; a call without Mcp-Session-Id is 400',
    timeout: 30000,
    fn: async () => {
      await withServer({}, async (s) => {
        const init = () => request(s.base, 'POST', '/mcp', {
          key: s.key,
          headers: { accept: 'application/json, text/event-stream' },
          body: { jsonrpc: '2.0', id: 1, method: 'initialize',
            params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } },
        });
        const ids = [];
        for (;;) {
          const r = await init();
          if (r.status === 429) {
            assert(Number(r.headers['retry-after']) > 0, 'Retry-After');
            break;
          }
          eq(r.status, 200, `initialize: ${r.text}`);
          ids.push(r.headers['mcp-session-id']);
          assert(ids.length <= 64, 'MCP sessions are capped per organization');
        }
        assert(ids.length >= 1 && new Set(ids).size === ids.length, `distinct ids: ${ids}`);
        const del = await request(s.base, 'DELETE', '/mcp', { key: s.key, headers: { 'mcp-session-id': ids[0] } });
        eq(del.status, 204, `DELETE /mcp: ${del.text}`);
        eq((await init()).status, 200, 'a slot is free again after DELETE');
        eq((await request(s.base, 'GET', '/mcp', { key: s.key })).status, 405, 'GET /mcp');
        const noid = await request(s.base, 'POST', '/mcp', { key: s.key, body: { jsonrpc: '2.0', id: 2, method: 'tools/list' } });
        eq(noid.status, 400, `no Mcp-Session-Id: ${noid.text}`);
        eq((await request(s.base, 'POST', '/mcp', { body: { jsonrpc: '2.0', id: 3, method: 'ping' } })).status, 401, 'no key');
      });
    },
  },
];
