// Issue 35 item 3: credential providers (KERNEL_API_NEWER.md 1.4
// "Credentials / credential providers", client.credentialProviders of
// @onkernel/sdk 0.84.0). A provider is a 1Password Connect token; the
// operator's Connect server is BROWSERD_ONEPASSWORD_CONNECT_URL
// (docs/operator.md). A fake Connect server here serves two vaults and
// their items to the right Bearer token only. The token is sealed at rest
// and never returned; features.credential_providers gates the resource.
// No Chromium.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request, assert, eq, isError, withServer, ok2xx, newOrg, startSite, waitFor } from './lib.mjs';

const ADMIN = 'admin-token-for-credential-providers';
const TOKEN = 'ops_eyJhbGciOiJFUzI1NiJ9-fake-connect-token-Q7w9';
const VAULTS = [{ id: 'vaultaaaaaaaaaaaaaaaaaaaaa', name: 'Private' }, { id: 'vaultbbbbbbbbbbbbbbbbbbbbb', name: 'Shared' }];
const ITEMS = {
  vaultaaaaaaaaaaaaaaaaaaaaa: [
    { id: 'itemaaaaaaaaaaaaaaaaaaaaa1', title: 'GitHub', vault: { id: VAULTS[0].id }, category: 'LOGIN', urls: [{ primary: true, href: 'https://github.com/login' }] },
    { id: 'itemaaaaaaaaaaaaaaaaaaaaa2', title: 'Bank', vault: { id: VAULTS[0].id }, category: 'LOGIN' },
  ],
  vaultbbbbbbbbbbbbbbbbbbbbb: [
    { id: 'itembbbbbbbbbbbbbbbbbbbbb1', title: 'Shop', vault: { id: VAULTS[1].id }, category: 'LOGIN', urls: [{ href: 'https://shop.example/' }] },
  ],
};

// A fake 1Password Connect server: GET /v1/vaults and /v1/vaults/{id}/items
// for the Bearer TOKEN, 401 otherwise. seen holds every request's path and
// authorization.
async function fakeConnect() {
  const seen = [];
  const site = await startSite((req, res) => {
    seen.push({ path: req.url, auth: req.headers.authorization });
    const send = (status, body) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(body)); };
    if (req.headers.authorization !== `Bearer ${TOKEN}`) return send(401, { status: 401, message: 'Invalid bearer token' });
    if (req.method === 'GET' && req.url === '/v1/vaults') return send(200, VAULTS);
    const m = /^\/v1\/vaults\/([a-z]+)\/items$/.exec(req.url);
    if (req.method === 'GET' && m && ITEMS[m[1]]) return send(200, ITEMS[m[1]]);
    return send(404, { status: 404, message: 'not found' });
  });
  site.seen = seen;
  return site;
}

const server = (env, fn) => withServer({ args: ['--admin-token', ADMIN], env }, fn);

const noToken = (what, text) => assert(!text.includes(TOKEN), `${what} shows the token: ${text}`);

function filesHolding(dir, needle) {
  const hits = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && readFileSync(p).includes(needle)) hits.push(p.slice(dir.length));
    }
  };
  walk(dir);
  return hits;
}

export const tests = [
  {
    name: 'issue 35.3: a 1Password provider is created, read, listed, updated and deleted; items and test go through the Connect REST API with the token as Bearer; the token is never returned nor in clear in the data folder',
    fn: async () => {
      const connect = await fakeConnect();
      try {
        await server({ BROWSERD_ONEPASSWORD_CONNECT_URL: connect.url }, async (s) => {
          const k = s.key;
          const c = await request(s.base, 'POST', '/org/credential_providers', { key: k, body: { name: 'my-1password', provider_type: 'onepassword', token: TOKEN, cache_ttl_seconds: 300 } });
          eq(c.status, 200, `create: ${c.text}`);
          noToken('create', c.text);
          eq([c.json.name, c.json.provider_type, c.json.enabled, c.json.priority], ['my-1password', 'onepassword', true, 0], 'created');
          assert(c.json.id && c.json.created_at && c.json.updated_at, c.text);
          const id = c.json.id;

          const g = ok2xx(await request(s.base, 'GET', `/org/credential_providers/${id}`, { key: k }), 'get');
          eq(g.name, 'my-1password', 'get');
          const l = await request(s.base, 'GET', '/org/credential_providers', { key: k });
          eq(l.status, 200, l.text);
          noToken('list', l.text);
          eq(l.json.map((p) => p.id), [id], 'list');

          const items = await request(s.base, 'GET', `/org/credential_providers/${id}/items`, { key: k });
          eq(items.status, 200, `items: ${items.text}`);
          noToken('items', items.text);
          eq(items.json.items.map((i) => [i.id, i.path, i.title, i.vault_id, i.vault_name, i.urls]), [
            ['itemaaaaaaaaaaaaaaaaaaaaa1', 'Private/GitHub', 'GitHub', VAULTS[0].id, 'Private', ['https://github.com/login']],
            ['itemaaaaaaaaaaaaaaaaaaaaa2', 'Private/Bank', 'Bank', VAULTS[0].id, 'Private', undefined],
            ['itembbbbbbbbbbbbbbbbbbbbb1', 'Shared/Shop', 'Shop', VAULTS[1].id, 'Shared', ['https://shop.example/']],
          ], 'items of both vaults');
          const t = await request(s.base, 'POST', `/org/credential_providers/${id}/test`, { key: k });
          eq(t.status, 200, `test: ${t.text}`);
          eq([t.json.success, t.json.vaults], [true, VAULTS], 'test lists the vaults');
          assert(connect.seen.length >= 4 && connect.seen.every((r) => r.auth === `Bearer ${TOKEN}`), JSON.stringify(connect.seen));

          // A new token: the old one no longer goes out; a wrong token fails test (success false) and items (502).
          const u = await request(s.base, 'PATCH', `/org/credential_providers/${id}`, { key: k, body: { token: 'ops_wrong-token', name: 'renamed', enabled: false, priority: 3 } });
          eq(u.status, 200, `update: ${u.text}`);
          eq([u.json.name, u.json.enabled, u.json.priority], ['renamed', false, 3], 'updated');
          assert(!u.text.includes('ops_wrong-token'), u.text);
          const bad = ok2xx(await request(s.base, 'POST', `/org/credential_providers/${id}/test`, { key: k }), 'test with a wrong token');
          eq([bad.success, bad.vaults], [false, []], 'a refused token');
          assert(/HTTP 401/.test(bad.error) && !bad.error.includes(connect.hostport), bad.error);
          const bi = await request(s.base, 'GET', `/org/credential_providers/${id}/items`, { key: k });
          isError(bi, 502, 'bad_gateway');
          assert(/HTTP 401/.test(bi.json.message) && !bi.text.includes('ops_wrong'), bi.text);
          ok2xx(await request(s.base, 'PATCH', `/org/credential_providers/${id}`, { key: k, body: { token: TOKEN } }), 'the token back');
          eq(ok2xx(await request(s.base, 'POST', `/org/credential_providers/${id}/test`, { key: k }), 'test').success, true, 'test again');

          eq(filesHolding(s.dir, TOKEN), [], 'files holding the token in clear');
          await waitFor(() => /credential_providers\/[a-z0-9]+\/test/.test(s.log), 'the access lines');
          assert(!s.log.includes(TOKEN), 'the log shows the token');

          // Another organization: 404 on every call, an empty list.
          const other = await newOrg(s, ADMIN, { name: 'other', plan: 'startup' });
          for (const [m, p] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['GET', '/items'], ['POST', '/test']]) {
            isError(await request(s.base, m, `/org/credential_providers/${id}${p}`, { key: other.key, body: m === 'PATCH' ? { name: 'stolen' } : undefined }), 404, 'not_found');
          }
          eq(ok2xx(await request(s.base, 'GET', '/org/credential_providers', { key: other.key }), 'other list'), [], 'the other org lists nothing');

          const d = await request(s.base, 'DELETE', `/org/credential_providers/${id}`, { key: k });
          eq(d.status, 204, `delete: ${d.text}`);
          isError(await request(s.base, 'GET', `/org/credential_providers/${id}`, { key: k }), 404, 'not_found');
          isError(await request(s.base, 'GET', `/org/credential_providers/${id}/items`, { key: k }), 404, 'not_found');
        });
      } finally {
        connect.close();
      }
    },
  },
  {
    name: 'issue 35.3: bad input is a 400 naming each field and its rule; without features.credential_providers 403; without a Connect server items is a 503 naming the setting',
    fn: () => server({}, async (s) => {
      const r = await request(s.base, 'POST', '/org/credential_providers', { key: s.key, body: { name: '', provider_type: 'bitwarden', token: 'has space\r\nX: y', cache_ttl_seconds: -1, color: 'red' } });
      isError(r, 400, 'bad_request');
      const msgs = r.json.details.map((d) => d.message);
      for (const re of [/^name: is required/, /^provider_type: is required and must be "onepassword"/, /^token: is required/,
        /^cache_ttl_seconds: must be an integer/, /^color: is not a field/]) {
        assert(msgs.some((m) => re.test(m)), `no detail matching ${re}: ${JSON.stringify(msgs)}`);
      }
      isError(await request(s.base, 'POST', '/org/credential_providers', { key: s.key, body: { name: 'x', provider_type: 'onepassword' } }), 400, 'bad_request');
      const c = ok2xx(await request(s.base, 'POST', '/org/credential_providers', { key: s.key, body: { name: 'x', provider_type: 'onepassword', token: TOKEN } }), 'create');
      const p = await request(s.base, 'PATCH', `/org/credential_providers/${c.id}`, { key: s.key, body: { enabled: 'yes', priority: 1.5, provider_type: 'onepassword' } });
      isError(p, 400, 'bad_request');
      assert(/enabled: must be a boolean/.test(p.text) && /priority: must be an integer/.test(p.text) && /provider_type: is not a field/.test(p.text), p.text);
      const u = await request(s.base, 'GET', `/org/credential_providers/${c.id}/items`, { key: s.key });
      isError(u, 503, 'unavailable');
      assert(/BROWSERD_ONEPASSWORD_CONNECT_URL/.test(u.json.message), u.text);

      const dev = await newOrg(s, ADMIN, { name: 'dev', plan: 'developer' });
      for (const [m, path] of [['POST', '/org/credential_providers'], ['GET', '/org/credential_providers'], ['GET', `/org/credential_providers/${c.id}`], ['POST', `/org/credential_providers/${c.id}/test`]]) {
        const g = await request(s.base, m, path, { key: dev.key, body: m === 'POST' && !path.endsWith('test') ? { name: 'x', provider_type: 'onepassword', token: TOKEN } : undefined });
        isError(g, 403, 'feature_not_enabled');
        assert(/features\.credential_providers/.test(g.json.message), g.json.message);
      }
    }),
  },
  {
    name: 'issue 35.3: one organization runs at most LIM_CREDPROV_CALLS_PER_ORG (2) Connect calls at once: a third is 429 with Retry-After while another organization still gets through',
    fn: async () => {
      // Connect holds every /v1/vaults answer until release() (the held requests are counted).
      const held = [];
      let open = false;
      const connect = await startSite((req, res) => {
        const answer = () => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify(req.url === '/v1/vaults' ? VAULTS : [])); };
        if (open) answer(); else held.push(answer);
      });
      const release = () => { open = true; held.splice(0).forEach((f) => f()); };
      try {
        await server({ BROWSERD_ONEPASSWORD_CONNECT_URL: connect.url }, async (s) => {
          const body = { name: 'p', provider_type: 'onepassword', token: TOKEN };
          const mine = ok2xx(await request(s.base, 'POST', '/org/credential_providers', { key: s.key, body }), 'create');
          const other = await newOrg(s, ADMIN, { name: 'other', plan: 'startup' });
          const theirs = ok2xx(await request(s.base, 'POST', '/org/credential_providers', { key: other.key, body }), 'create other');
          const slow = [1, 2].map(() => request(s.base, 'POST', `/org/credential_providers/${mine.id}/test`, { key: s.key }));
          await waitFor(() => held.length === 2, 'two calls held by Connect');
          const third = await request(s.base, 'POST', `/org/credential_providers/${mine.id}/test`, { key: s.key });
          isError(third, 429, 'limit_exceeded');
          assert(/calls to credential providers/.test(third.json.message), third.text);
          assert(Number(third.headers['retry-after']) >= 1, `Retry-After: ${third.headers['retry-after']}`);
          const elsewhere = request(s.base, 'POST', `/org/credential_providers/${theirs.id}/test`, { key: other.key });
          await waitFor(() => held.length === 3, 'the other organization reached Connect');
          release();
          for (const r of [...await Promise.all(slow), await elsewhere]) eq(ok2xx(r, 'held call').success, true, 'held call succeeded');
          eq(ok2xx(await request(s.base, 'POST', `/org/credential_providers/${mine.id}/test`, { key: s.key }), 'after').success, true, 'the slots are free again');
        });
      } finally {
        release();
        connect.close();
      }
    },
  },
  {
    name: 'issue 35.2: POST /browsers {vaults} resolves each VaultReference in the caller\'s project: an unknown or another organization\'s vault is a 404 naming vaults[i], a malformed reference a 400, a plan without features.vaults a 403 (no browser starts)',
    fn: () => server({}, async (s) => {
      const api = (m, p, body, key = s.key) => request(s.base, m, p, { key, body });
      const v = ok2xx(await api('POST', '/vaults', { name: 'team' }), 'vault');
      const other = await newOrg(s, ADMIN, { name: 'other', plan: 'startup' });
      const theirs = ok2xx(await api('POST', '/vaults', { name: 'theirs' }, other.key), 'their vault');
      for (const [vaults, idx, what] of [
        [[{ name: 'team' }, { name: 'nope' }], 1, 'name nope'],
        [[{ id: theirs.id }], 0, `id ${theirs.id}`],
        [[{ name: 'theirs' }], 0, 'name theirs'],
        [[{ id: 'team' }], 0, 'id team'], // a name given as an id
      ]) {
        const r = await api('POST', '/browsers', { vaults });
        isError(r, 404, 'not_found');
        assert(r.json.message.startsWith(`vaults[${idx}]: vault ${what} not found`), r.text);
      }
      const dup = await api('POST', '/browsers', { vaults: [{ name: 'team' }, { id: v.id }] });
      isError(dup, 400, 'bad_request');
      assert(/vaults\[1\]: vault [a-z0-9]+ is already listed/.test(dup.text), dup.text);
      const bad = await api('POST', '/browsers', { vaults: [{ id: v.id, name: 'team' }, { color: 'x' }, 'team'] });
      isError(bad, 400, 'bad_request');
      assert(/vaults\[0\]/.test(bad.text) && /vaults\[1\]/.test(bad.text) && /vaults\[2\]/.test(bad.text), bad.text);
      const dev = await newOrg(s, ADMIN, { name: 'dev', plan: 'developer' });
      const g = await api('POST', '/browsers', { vaults: [{ name: 'team' }] }, dev.key);
      isError(g, 403, 'feature_not_enabled');
      assert(/features\.vaults/.test(g.json.message), g.text);
      eq(ok2xx(await api('GET', '/browsers'), 'list'), [], 'no browser was created');
    }),
  },
];
