// The organization's and projects' limits (issue 33 item 4,
// KERNEL_API_NEWER.md 1.4) through the pinned client's own methods:
// organization.limits and projects.limits.
export function register(t) {
  const { sdkTest, withServer, assert, eq, errors } = t;

  sdkTest('organization.limits.retrieve', 'the plan\'s concurrency limit and the project default; update sets the default (0 removes it), a negative value or a plan figure is BadRequestError', async () => {
    await withServer(async (s, client) => {
      const l = await client.organization.limits.retrieve();
      eq(l.default_project_max_concurrent_sessions ?? null, null, 'no default at first');
      eq(l.auth_connections_used, 0, 'no managed-auth connection');
      eq((await client.organization.limits.update({ default_project_max_concurrent_sessions: 3 })).default_project_max_concurrent_sessions, 3, 'default set');
      eq((await client.organization.limits.retrieve()).default_project_max_concurrent_sessions, 3, 'kept');
      eq((await client.organization.limits.update({ default_project_max_concurrent_sessions: 0 })).default_project_max_concurrent_sessions ?? null, null, '0 removes it');
      for (const body of [{ max_concurrent_sessions: 3 }, { default_project_max_concurrent_sessions: -1 }]) {
        let err;
        try { await client.organization.limits.update(body); } catch (e) { err = e; }
        assert(err instanceof errors.BadRequestError, `${JSON.stringify(body)}: ${err && err.status}`);
      }
    });
  }, 60000, ['organization.limits.update']);

  sdkTest('projects.limits.retrieve', 'a project\'s caps by id and by name: update sets them, 0 removes one, max_pooled_sessions is null and BadRequestError when set', async () => {
    await withServer(async (s, client) => {
      const p = await client.projects.create({ name: 'web' });
      eq(await client.projects.limits.retrieve(p.id), { max_concurrent_sessions: null, max_concurrent_invocations: null, max_pooled_sessions: null }, 'no caps');
      eq(await client.projects.limits.update('web', { max_concurrent_sessions: 2, max_concurrent_invocations: 4 }),
        { max_concurrent_sessions: 2, max_concurrent_invocations: 4, max_pooled_sessions: null }, 'set by name');
      eq((await client.projects.limits.retrieve(p.id)).max_concurrent_sessions, 2, 'read back by id');
      eq((await client.projects.limits.update(p.id, { max_concurrent_sessions: 0 })).max_concurrent_sessions, null, '0 removes');
      let err;
      try { await client.projects.limits.update(p.id, { max_pooled_sessions: 1 }); } catch (e) { err = e; }
      assert(err instanceof errors.BadRequestError, `max_pooled_sessions: ${err && err.status}`);
    });
  }, 60000, ['projects.limits.update']);
}
