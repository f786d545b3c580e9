// Smoke: the binary starts, bootstraps, serves entitlements, and stops cleanly.
import { startServer, request, assert, eq, isError } from './lib.mjs';

export const tests = [
  {
    name: 'first start bootstraps org default on enterprise and answers GET /org/entitlements',
    fn: async () => {
      const s = await startServer();
      try {
        const r = await request(s.base, 'GET', '/org/entitlements', { key: s.key });
        eq(r.status, 200, r.text);
        eq(r.json.plan.id, 'enterprise');
        eq(r.json.limits.max_concurrent_browsers, null);
        isError(await request(s.base, 'GET', '/org/entitlements'), 401, 'unauthorized');
      } finally {
        eq(await s.stop(), 0, 'exit code after SIGTERM');
        s.cleanup();
      }
    },
  },
];
