// Calls of newer clients (KERNEL_API_NEWER.md 1.2-1.4, issue 33 items 2 and 3)
// through the pinned client's generic methods, as a 0.87+ client makes them:
// GET /auth/context, the X-Kernel-Project header (client option `project`),
// and OTLP destinations at /telemetry/destinations.
export function register(t) {
  const { sdkTest, withServer, assert, eq, errors } = t;

  sdkTest("client.get('/auth/context')", 'the caller\'s key, scopes and organization; X-Kernel-Project (by name) moves the effective scope', async () => {
    await withServer(async (s, client) => {
      const web = await client.post('/org/projects', { body: { name: 'web' } });
      const a = await client.get('/auth/context');
      eq([a.authentication.method, a.authentication.source, a.principal.type], ['api_key', 'api_key', 'api_key'], 'method, source, principal type');
      eq(a.principal.id, a.authentication.credential_id, 'the key is the principal');
      eq(a.authorization.credential_scope, {}, 'an organization key has no credential scope');
      const inWeb = await s.client({ defaultHeaders: { 'X-Kernel-Project': 'web' } }).get('/auth/context');
      eq(inWeb.authorization.effective_scope, { project_id: web.id }, 'X-Kernel-Project selects web');
      eq(inWeb.organization, a.organization, 'same organization');
      let err;
      try { await s.clientWithKey('bd_wrong_key', { maxRetries: 0 }).get('/auth/context'); } catch (e) { err = e; }
      assert(err instanceof errors.AuthenticationError, `a wrong key: ${err && err.status}`);
    });
  });

  sdkTest("client.post('/telemetry/destinations')", 'OTLP destinations at the service\'s path: create, list, get and update by name, delete; the /org path sees the same record', async () => {
    await withServer(async (s, client) => {
      const d = await client.post('/telemetry/destinations', { body: { name: 'collector', endpoint: 'http://127.0.0.1:4318/v1/logs' } });
      eq(d.name, 'collector', 'created');
      eq((await client.get('/telemetry/destinations')).map((x) => x.id), [d.id], 'list');
      eq((await client.get('/telemetry/destinations/collector')).id, d.id, 'get by name');
      eq((await client.patch('/telemetry/destinations/collector', { body: { name: 'c2' } })).name, 'c2', 'update by name');
      eq((await client.get(`/org/telemetry/destinations/${d.id}`)).name, 'c2', 'the /org path');
      await client.delete('/telemetry/destinations/c2');
      let err;
      try { await client.get(`/telemetry/destinations/${d.id}`); } catch (e) { err = e; }
      assert(err instanceof errors.NotFoundError, `gone: ${err && err.status}`);
    }, { args: ['--allow-loopback', '127.0.0.1:4318'] });
  }, 60000, ["client.get('/telemetry/destinations')", "client.get('/telemetry/destinations/{id_or_name}')",
    "client.patch('/telemetry/destinations/{id_or_name}')", "client.delete('/telemetry/destinations/{id_or_name}')"]);
}
