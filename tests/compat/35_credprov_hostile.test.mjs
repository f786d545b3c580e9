// Issue 35 item 3 against a hostile 1Password Connect server: the operator's
// Connect server (BROWSERD_ONEPASSWORD_CONNECT_URL) answers untrusted bytes.
// One items or test call is bounded in time (LIM_CREDPROV_TIMEOUT_MS, 15 s,
// shared by every Connect request of the call), each Connect answer in size
// (LIM_CREDPROV_RESPONSE_BYTES), and the text one items call keeps from all
// its answers (LIM_CREDPROV_ITEMS_BYTES). The fake Connect server here picks
// its behaviour by the Bearer token of the provider that calls it. No
// Chromium.
import { request, assert, eq, isError, withServer, ok2xx, startSite, waitFor } from '../blackbox/lib.mjs';

const VAULT = (i) => `vault${String(i).padStart(21, 'a')}`;

// A fake Connect server. By token: 'ops_slow' never answers, 'ops_drip'
// sends a head and then a byte every 200 ms, 'ops_huge' answers 5 MiB,
// 'ops_bad' answers malformed JSON, 'ops_wide' answers three vaults whose
// items are each about 3 MB (every answer under the per-answer cap; their
// sum over it). open counts the sockets not yet closed.
async function hostileConnect() {
  const sockets = new Set();
  const timers = new Set();
  const site = await startSite((req, res) => {
    sockets.add(req.socket);
    req.socket.on('close', () => sockets.delete(req.socket));
    const token = (req.headers.authorization || '').replace(/^Bearer /, '');
    const json = (body) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(body); };
    if (token === 'ops_slow') return;
    if (token === 'ops_drip') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('[');
      const t = setInterval(() => res.write(' '), 200);
      timers.add(t);
      req.socket.on('close', () => { clearInterval(t); timers.delete(t); });
      return;
    }
    if (token === 'ops_huge') return json(`[${'"x",'.repeat(5 * 1024 * 1024 / 4)}"x"]`);
    if (token === 'ops_bad') return json('[{"id": "vaultaaaa", "name": ');
    if (token === 'ops_wide') {
      if (req.url === '/v1/vaults') return json(JSON.stringify([0, 1, 2].map((i) => ({ id: VAULT(i), name: `V${i}` }))));
      const title = 't'.repeat(100000);
      return json(JSON.stringify(Array.from({ length: 30 }, (_, i) => ({ id: `item${i}`, title: `${i}${title}` }))));
    }
    return json('[]');
  });
  site.open = () => sockets.size;
  const close = site.close;
  site.close = () => { for (const t of timers) clearInterval(t); for (const s of sockets) s.destroy(); close(); };
  return site;
}

async function withConnect(fn) {
  const connect = await hostileConnect();
  try {
    await withServer({ env: { BROWSERD_ONEPASSWORD_CONNECT_URL: connect.url } }, (s) => fn(s, connect));
  } finally {
    connect.close();
  }
}

const provider = async (s, token) => ok2xx(await request(s.base, 'POST', '/org/credential_providers',
  { key: s.key, body: { name: token, provider_type: 'onepassword', token } }), `create ${token}`).id;

export const tests = [
  {
    name: 'issue 35.3 (hostile Connect): the text one items call keeps from all its Connect answers is capped (LIM_CREDPROV_ITEMS_BYTES): answers each under the per-answer cap that add up past it are a 502 bad_gateway saying so, not an answer that grows with the vault count',
    timeout: 60000,
    fn: () => withConnect(async (s) => {
      const id = await provider(s, 'ops_wide');
      const r = await request(s.base, 'GET', `/org/credential_providers/${id}/items`, { key: s.key });
      eq(r.status, 502, `items over the cap (${r.text.length} bytes: ${r.text.slice(0, 200)})`);
      isError(r, 502, 'bad_gateway');
      assert(/items are larger than the answer cap/.test(r.json.message), r.text.slice(0, 300));
      // The call gave its slot back: the organization's next call goes through.
      const t = ok2xx(await request(s.base, 'POST', `/org/credential_providers/${id}/test`, { key: s.key }), 'test');
      eq(t.success, true, `test after the capped items call: ${JSON.stringify(t).slice(0, 200)}`);
      eq(t.vaults.length, 3, 'vaults');
    }),
  },
  {
    name: 'issue 35.3 (hostile Connect): a Connect server that never answers or drips bytes holds a call only until its deadline (LIM_CREDPROV_TIMEOUT_MS), while the server answers others; the socket is closed; an answer over LIM_CREDPROV_RESPONSE_BYTES or malformed JSON is an error naming it, never a crash',
    timeout: 90000,
    fn: () => withConnect(async (s, connect) => {
      const slow = await provider(s, 'ops_slow');
      const drip = await provider(s, 'ops_drip');
      const calls = [slow, drip].map((id) => request(s.base, 'POST', `/org/credential_providers/${id}/test`, { key: s.key }));
      await waitFor(() => connect.open() === 2, 'both calls reached Connect');
      // Held calls take no more than their own slots: the server answers meanwhile.
      ok2xx(await request(s.base, 'GET', '/org/credential_providers', { key: s.key }), 'list while held');
      for (const r of await Promise.all(calls)) {
        const t = ok2xx(r, 'held test');
        eq(t.success, false, `a held call fails: ${JSON.stringify(t)}`);
        assert(/answer failed/.test(t.error), `error names the failed answer: ${t.error}`);
        assert(!t.error.includes('127.0.0.1'), `no host in the error: ${t.error}`);
      }
      await waitFor(() => connect.open() === 0, 'browserd closed its Connect sockets');
      const huge = ok2xx(await request(s.base, 'POST', `/org/credential_providers/${await provider(s, 'ops_huge')}/test`, { key: s.key }), 'huge');
      eq(huge.success, false, 'huge answer');
      assert(/larger than the response cap/.test(huge.error), huge.error);
      const badId = await provider(s, 'ops_bad');
      const bad = ok2xx(await request(s.base, 'POST', `/org/credential_providers/${badId}/test`, { key: s.key }), 'malformed');
      eq(bad.success, false, 'malformed answer');
      assert(/not a JSON array/.test(bad.error), bad.error);
      const items = await request(s.base, 'GET', `/org/credential_providers/${badId}/items`, { key: s.key });
      isError(items, 502, 'bad_gateway');
      ok2xx(await request(s.base, 'GET', '/org/credential_providers', { key: s.key }), 'still serving');
    }),
  },
];
