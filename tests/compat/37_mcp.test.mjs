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
<p id="out">waiting</p>
<script>addEventListener('keydown', (e) => { document.title = 'key ' + e.key; });</script>`;

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
    name: 'issue 37.6: an MCP client navigates, snapshots a ref, clicks and types by ref, presses a key, evaluates, uses tabs and files, takes a screenshot; DELETE /mcp ends its browser; another org cannot use the MCP session',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(PAGE); });
      try {
        await withServer({ args: [...site.allow, '--admin-token', 'adm'] }, async (s) => {
          const { client, transport } = await connect(s, s.key);
          const names = (await client.listTools()).tools.map((t) => t.name);
          for (const n of ['navigate', 'snapshot', 'click', 'type', 'press_key', 'screenshot', 'evaluate', 'tabs', 'live_view_url', 'files', 'repl'])
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

          const key = await client.callTool({ name: 'press_key', arguments: { key: 'Escape' } });
          assert(!key.isError, `press_key: ${text(key)}`);
          eq(text(await client.callTool({ name: 'evaluate', arguments: { expression: 'document.title' } })), '"key Escape"', 'the page saw the key');

          // Tabs: a new one is selected, listed, and closed; the first is selected again.
          const opened = await client.callTool({ name: 'tabs', arguments: { action: 'new', url: 'about:blank' } });
          const tabs = text(opened).trim().split('\n');
          eq(tabs.length, 2, `two tabs: ${text(opened)}`);
          const sel = tabs.find((l) => l.endsWith('(selected)'));
          assert(!opened.isError && / about:blank \(selected\)$/.test(sel), `the new tab is selected: ${text(opened)}`);
          eq(text(await client.callTool({ name: 'evaluate', arguments: { expression: 'location.href' } })), '"about:blank"', 'tools act on the selected tab');
          const closed = await client.callTool({ name: 'tabs', arguments: { action: 'close', index: Number(sel.split(':')[0]) } });
          assert(!closed.isError && /^0: .*127\.0\.0\.1.* \(selected\)\n$/.test(text(closed)), `tabs close: ${text(closed)}`);
          const badTab = await client.callTool({ name: 'tabs', arguments: { action: 'select', index: 5 } });
          assert(badTab.isError === true && /index/.test(text(badTab)), `a tab that is not there: ${text(badTab)}`);

          // Files through the session's file system.
          const w = await client.callTool({ name: 'files', arguments: { action: 'write', path: '/tmp/mcp.txt', content: 'from mcp' } });
          assert(!w.isError, `files write: ${text(w)}`);
          eq(text(await client.callTool({ name: 'files', arguments: { action: 'read', path: '/tmp/mcp.txt' } })), 'from mcp', 'files read');
          const lv = await client.callTool({ name: 'live_view_url', arguments: {} });
          assert(lv.isError === true && /headless/.test(text(lv)), `a headless browser has no live view: ${text(lv)}`);

          // The REPL (issue 37.6: "the REPL (when it exists)"): state kept
          // between calls, the page reached, an exception isError, an image part.
          const r1 = await client.callTool({ name: 'repl', arguments: { code: 'const six = 6; repl.write(String(six * 7))' } });
          assert(!r1.isError, `repl: ${JSON.stringify(r1).slice(0, 300)}`);
          eq(text(r1), '42', 'repl output');
          eq(text(await client.callTool({ name: 'repl', arguments: { code: 'repl.write(String(six), (await pageInfo()).url.startsWith("http"))' } })), '6 true', 'repl state and page');
          const r3 = await client.callTool({ name: 'repl', arguments: { code: 'throw new Error("repl boom")' } });
          assert(r3.isError === true && /repl boom/.test(text(r3)), `a thrown error is isError: ${text(r3)}`);
          const r4 = await client.callTool({ name: 'repl', arguments: { code: 'repl.emitImage(await captureScreenshot())' } });
          const rimg = r4.content.find((c) => c.type === 'image');
          assert(!r4.isError && rimg && Buffer.from(rimg.data, 'base64').subarray(1, 4).toString() === 'PNG', `repl image part: ${JSON.stringify(r4).slice(0, 300)}`);
          const r5 = await client.callTool({ name: 'repl', arguments: { code: '1', timeout_sec: 151 } });
          assert(r5.isError === true && /timeout_sec/.test(text(r5)), `timeout_sec over 150: ${text(r5)}`);

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
    name: 'issue 37.6: MCP sessions per organization are capped and count against limits.max_concurrent_browsers (429 with Retry-After); GET /mcp is 405; a call without Mcp-Session-Id is 400; malformed messages are JSON-RPC errors',
    timeout: 30000,
    fn: async () => {
      await withServer({ args: ['--admin-token', 'adm'] }, async (s) => {
        const init = (key = s.key) => request(s.base, 'POST', '/mcp', {
          key,
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
        // Protocol errors are JSON-RPC errors: malformed JSON, a batch, an id that is an object.
        for (const [raw, code] of [['{', -32700], ['[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600], ['{"jsonrpc":"2.0","id":{},"method":"ping"}', -32600]]) {
          const r = await request(s.base, 'POST', '/mcp', { key: s.key, raw, headers: { 'content-type': 'application/json' } });
          eq([r.status, r.json?.error?.code], [400, code], `${raw}: ${r.text}`);
        }
        // An MCP session counts against the org's browsers from its start.
        const tiny = await newOrg(s, 'adm', { name: 'tiny', overrides: { limits: { max_concurrent_browsers: 2 } } });
        for (let i = 0; i < 2; i++) eq((await init(tiny.key)).status, 200, `initialize ${i} within the org's browsers`);
        const third = await init(tiny.key);
        eq(third.status, 429, `a third MCP session past max_concurrent_browsers 2: ${third.text}`);
        assert(/max_concurrent_browsers/.test(third.text), `names the limit: ${third.text}`);
      });
    },
  },
];
