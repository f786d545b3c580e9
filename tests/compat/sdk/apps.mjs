// Apps, deployments and invocations (issue 36) through the pinned client's
// own methods, on a server with nothing deployed: what each method answers
// before any app exists (empty lists, NotFoundError for unknown ids,
// BadRequestError naming the field). The deployed app itself (a sandboxed
// Node run that drives a browser) is tests/compat/36_apps.test.mjs.
export function register(t) {
  const { sdkTest, withServer, assert, eq, errors } = t;
  const fails = async (what, fn, cls) => {
    let err;
    try {
      const r = await fn();
      if (r && typeof r[Symbol.asyncIterator] === 'function') for await (const _ of r) { /* drain */ }
    } catch (e) { err = e; }
    assert(err instanceof cls, `${what}: ${cls.name} expected, got ${err && err.constructor.name}: ${err && err.message}`);
    return err;
  };

  sdkTest('deployments.create', 'every method of deployments, apps and invocations answers an empty server: empty lists, NotFoundError for unknown ids, BadRequestError naming the field', async () => {
    await withServer(async (s, client) => {
      const id = 'aaaaaaaaaaaaaaaaaaaaaaaa';
      const e = await fails('create without entrypoint', () => client.deployments.create({ file: new File([Buffer.from('PK\x03\x04')], 'a.zip') }), errors.BadRequestError);
      assert(/entrypoint_rel_path/.test(e.message), e.message);
      const py = await fails('a Python entrypoint', () => client.deployments.create({ file: new File([Buffer.from('PK\x03\x04')], 'a.zip'), entrypoint_rel_path: 'app.py' }), errors.BadRequestError);
      assert(/Node/.test(py.message), py.message);
      await fails('deployments.retrieve', () => client.deployments.retrieve(id), errors.NotFoundError);
      await fails('deployments.delete', () => client.deployments.delete(id), errors.NotFoundError);
      await fails('deployments.follow', () => client.deployments.follow(id), errors.NotFoundError);
      const deps = [];
      for await (const d of client.deployments.list()) deps.push(d);
      eq(deps.length, 0, 'deployments.list');
      const apps = [];
      for await (const a of client.apps.list()) apps.push(a);
      eq(apps.length, 0, 'apps.list');
      await fails('invocations.create', () => client.invocations.create({ app_name: 'x', action_name: 'y', version: '1' }), errors.NotFoundError);
      const b = await fails('invocations.create bad timeout', () => client.invocations.create({ app_name: 'x', action_name: 'y', version: '1', async: true, async_timeout_seconds: 1 }), errors.BadRequestError);
      assert(/async_timeout_seconds/.test(b.message), b.message);
      await fails('invocations.retrieve', () => client.invocations.retrieve(id), errors.NotFoundError);
      await fails('invocations.update', () => client.invocations.update(id, { status: 'succeeded' }), errors.NotFoundError);
      await fails('invocations.follow', () => client.invocations.follow(id), errors.NotFoundError);
      await fails('invocations.listBrowsers', () => client.invocations.listBrowsers(id), errors.NotFoundError);
      await fails('invocations.deleteBrowsers', () => client.invocations.deleteBrowsers(id), errors.NotFoundError);
      const invs = [];
      for await (const i of client.invocations.list()) invs.push(i);
      eq(invs.length, 0, 'invocations.list');
    });
  }, 60000, ['deployments.retrieve', 'deployments.list', 'deployments.delete', 'deployments.follow', 'apps.list',
    'invocations.create', 'invocations.retrieve', 'invocations.update', 'invocations.list', 'invocations.deleteBrowsers',
    'invocations.follow', 'invocations.listBrowsers']);
}
