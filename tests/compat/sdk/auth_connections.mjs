// Managed auth through the pinned client (issue 35 item 4; KERNEL_API_NEWER.md
// 1.4 "Managed auth", docs/managed-auth.md): every auth.connections method of
// 0.84.0. The login flow runs for real against a loopback page already past
// its login (no form: SUCCESS at once); tests/compat/35_managed_auth covers
// the forms, codes and health checks.
export function register(t) {
  const { sdkTest, withServer, assert, eq, startSite, errors } = t;
  const methods = ['retrieve', 'update', 'list', 'delete', 'login', 'submit', 'follow', 'timeline'].map((m) => `auth.connections.${m}`);
  sdkTest('auth.connections.create', 'create, retrieve, update, list, login (a page with no login form: SUCCESS), follow (SSE to the end), timeline, submit with no flow waiting -> ConflictError, delete -> NotFoundError after', async () => {
    const site = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<!doctype html><title>in</title><h1>Welcome back</h1>'); });
    try {
      await withServer(async (s, client) => {
        const c = await client.auth.connections.create({ domain: '127.0.0.1', profile_name: 'sdk-ma', login_url: `${site.url}/account` });
        eq([c.status, c.flow_status], ['NEEDS_AUTH', null], 'created');
        eq((await client.auth.connections.retrieve(c.id)).profile_name, 'sdk-ma', 'retrieve');
        eq((await client.auth.connections.update(c.id, { health_checks: false })).health_checks, false, 'update');
        const ids = [];
        for await (const x of client.auth.connections.list({ domain: '127.0.0.1' })) ids.push(x.id);
        eq(ids, [c.id], 'list');
        const l = await client.auth.connections.login(c.id);
        eq([l.id, l.flow_type], [c.id, 'LOGIN'], 'login');
        const evs = [];
        for await (const ev of await client.auth.connections.follow(c.id)) evs.push(ev);
        eq([evs.at(-1).event, evs.at(-1).flow_status], ['managed_auth_state', 'SUCCESS'], `follow: ${JSON.stringify(evs)}`);
        const after = await client.auth.connections.retrieve(c.id);
        eq(after.status, 'AUTHENTICATED', 'authenticated');
        const tl = [];
        for await (const x of client.auth.connections.timeline(c.id)) tl.push(x);
        eq([tl[0].type, tl[0].status], ['login', 'SUCCESS'], 'timeline');
        let err;
        try { await client.auth.connections.submit(c.id, { field_values: { code: '1' } }); } catch (e) { err = e; }
        assert(err instanceof errors.ConflictError, `submit with no flow: ${err && err.status}`);
        await client.auth.connections.delete(c.id);
        err = undefined;
        try { await client.auth.connections.retrieve(c.id); } catch (e) { err = e; }
        assert(err instanceof errors.NotFoundError, `deleted: ${err && err.status}`);
      }, { args: site.allow });
    } finally { site.close(); }
  }, 60000, methods);
}
