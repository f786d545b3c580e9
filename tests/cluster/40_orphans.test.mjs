// Issue h9 on a cluster: a node that dies (kill -9) leaves background
// records behind, which only it would have finished. When its lease runs
// out, the surviving node whose sweep declares it dead ends them: an async
// invocation it was running ends `failed` ("the node running it was lost"),
// its events stream (read through the survivor) ends with that state, and a
// login flow it ran ends FAILED (error_code node_lost) instead of
// being forwarded to the dead node. Before, both stayed running /
// IN_PROGRESS. A node restarted under its name within its lease ends its
// earlier run's records itself ("the node running it restarted").
// Setup and checks are tests/cluster/lib.mjs's (startOrphanWork, orphansEnded).
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^40_orphans'
import { assert } from '../blackbox/lib.mjs';
import { startCluster, startLoginSite, startOrphanWork, orphansEnded } from './lib.mjs';

export const tests = [
  {
    name: 'issue h9.2: kill -9 of node 1 while it runs an async invocation and a login flow: once its lease ends, node 2 ends both (failed "the node running it was lost"; FAILED node_lost) and their events through node 2 end with that state',
    timeout: 90000,
    fn: async () => {
      const web = await startLoginSite();
      const c = await startCluster({ nodes: 2, env: { BROWSERD_NODE_LEASE_MS: '3000' }, args: web.allow });
      c.expectLoss();
      const [n1, n2] = c.nodes;
      try {
        const work = await startOrphanWork(c, n1, n2, web);
        await n1.kill9();
        // On the old binary both stay running / IN_PROGRESS.
        const problems = await orphansEnded(c, n2, work, 'node_lost');
        assert(problems.length === 0, problems.join('\n'));
      } finally {
        await c.stop();
        web.close();
      }
    },
  },
  {
    name: 'issue h9.2: node 1 killed (-9) while it runs an async invocation and restarted under its name within its lease ends the invocation itself as it reaps its earlier run (failed, "the node running it restarted")',
    timeout: 90000,
    fn: async () => {
      // A lease long enough that node 2's sweep never comes first.
      const c = await startCluster({ nodes: 2, env: { BROWSERD_NODE_LEASE_MS: '30000' } });
      c.expectLoss();
      const [n1, n2] = c.nodes;
      try {
        const work = await startOrphanWork(c, n1, n2);
        await n1.kill9();
        await n1.start();
        // On the old binary it stays running.
        const problems = await orphansEnded(c, n2, work, 'node_restarted', 20000);
        assert(problems.length === 0, problems.join('\n'));
      } finally {
        await c.stop();
      }
    },
  },
];
