// client.credentialProviders of @onkernel/sdk 0.84.0 (issue 35 item 3):
// every method through the official client against a fake 1Password Connect
// server (BROWSERD_ONEPASSWORD_CONNECT_URL); the token never comes back.
const TOKEN = 'ops_sdk-fake-connect-token-8Jd2';
const VAULT = { id: 'sdkvaultaaaaaaaaaaaaaaaaaa', name: 'Team' };
const ITEM = { id: 'sdkitemaaaaaaaaaaaaaaaaaaa', title: 'Mail', vault: { id: VAULT.id }, urls: [{ href: 'https://mail.example/' }] };

export function register(t) {
  const { sdkTest, withServer, startSite, assert, eq, errors, rejects } = t;
  sdkTest('credentialProviders.create', 'create, retrieve, list (auto-pagination), update, listItems, test, delete through a fake Connect server: the token is never returned', async () => {
    const connect = await startSite((req, res) => {
      const send = (status, body) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(body)); };
      if (req.headers.authorization !== `Bearer ${TOKEN}`) return send(401, { status: 401, message: 'Invalid token' });
      if (req.url === '/v1/vaults') return send(200, [VAULT]);
      if (req.url === `/v1/vaults/${VAULT.id}/items`) return send(200, [ITEM]);
      return send(404, { status: 404 });
    });
    try {
      await withServer(async (s, client) => {
        const p = await client.credentialProviders.create({ name: 'op', provider_type: 'onepassword', token: TOKEN, cache_ttl_seconds: 60 });
        eq([p.name, p.provider_type, p.enabled, p.priority], ['op', 'onepassword', true, 0], 'created');
        assert(!JSON.stringify(p).includes(TOKEN), 'no token in the record');
        eq((await client.credentialProviders.retrieve(p.id)).name, 'op', 'retrieve');
        for (let i = 0; i < 2; i++) await client.credentialProviders.create({ name: `more${i}`, provider_type: 'onepassword', token: TOKEN });
        const names = [];
        for await (const x of client.credentialProviders.list({ limit: 2 })) names.push(x.name);
        eq(names, ['op', 'more0', 'more1'], 'every page');
        const items = await client.credentialProviders.listItems(p.id);
        eq(items.items, [{ id: ITEM.id, path: 'Team/Mail', title: 'Mail', vault_id: VAULT.id, vault_name: 'Team', urls: ['https://mail.example/'] }], 'listItems');
        const r = await client.credentialProviders.test(p.id);
        eq([r.success, r.vaults], [true, [VAULT]], 'test');
        const u = await client.credentialProviders.update(p.id, { name: 'op2', priority: 2, enabled: false });
        eq([u.name, u.priority, u.enabled], ['op2', 2, false], 'updated');
        await client.credentialProviders.delete(p.id);
        await rejects(() => client.credentialProviders.retrieve(p.id), errors.NotFoundError, 404, 'deleted');
        await rejects(() => client.credentialProviders.create({ name: 'x', provider_type: 'onepassword', token: '' }), errors.BadRequestError, 400, 'an empty token');
      }, { env: { BROWSERD_ONEPASSWORD_CONNECT_URL: connect.url } });
    } finally {
      connect.close();
    }
  }, 60000, ['credentialProviders.retrieve', 'credentialProviders.list', 'credentialProviders.update', 'credentialProviders.delete', 'credentialProviders.listItems', 'credentialProviders.test']);
}
