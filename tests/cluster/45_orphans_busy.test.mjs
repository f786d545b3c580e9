// Issue h12: the records a dead node leaves (docs/multinode.md "Records a
// node leaves behind"), on a busy host and when the sweeper itself dies.
// 1. 40_orphans' node-lost path (kill -9 of node 1 while it runs an async
//    invocation and a login flow) while `stress-ng --cpu 2` keeps both cores
//    busy (withLoad, ended by its PID): every record ends failed node_lost,
//    once, and nothing reads running. Outcomes only, never times.
// 2. The sweeper dies between the sweep's commit and the end of the records:
//    the test switch BROWSERD_TEST_SWEEP_STALL_NODE=n1 stalls whichever node
//    sweeps n1 right after its commit; the test kills it (-9). The sweep
//    claims the dead node's records for the sweeper until a lease later
//    (nodes.orphans_by / orphans_until); the remaining node takes the claim
//    once it runs out and ends them. Before, nothing looked again: they read
//    running / IN_PROGRESS forever (the old binary has no switch either: its
//    sweeper ends them, and the test fails waiting for the stall).
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^45_orphans_busy'
import { assert, waitFor, withLoad } from '../blackbox/lib.mjs';
import { startCluster, startLoginSite, startOrphanWork, orphansEnded } from './lib.mjs';

const LOAD = { stressors: ['--cpu', '2'], workers: 2, seconds: 170 };

export const tests = [
  {
    name: 'issue h12.1: on a busy host (stress-ng --cpu 2), kill -9 of node 1 while it runs an async invocation and a login flow: node 2 ends both once, failed node_lost, and neither reads running',
    timeout: 180000,
    fn: async () => {
      const web = await startLoginSite();
      try {
        await withLoad(async () => {
          const c = await startCluster({ nodes: 2, env: { BROWSERD_NODE_LEASE_MS: '5000' }, args: web.allow });
          c.expectLoss();
          const [n1, n2] = c.nodes;
          try {
            const work = await startOrphanWork(c, n1, n2, web);
            await n1.kill9();
            const problems = await orphansEnded(c, n2, work, 'node_lost', 90000);
            assert(problems.length === 0, problems.join('\n'));
          } finally {
            await c.stop();
          }
        }, LOAD);
      } finally {
        web.close();
      }
    },
  },
  {
    name: 'issue h12.2: the node sweeping dead node 1 is killed (-9) after the sweep commits and before it ends node 1\'s records: the remaining node ends them (invocation failed "lost", login flow FAILED node_lost), once each',
    timeout: 150000,
    fn: async () => {
      const web = await startLoginSite();
      const c = await startCluster({
        nodes: 3, args: web.allow,
        env: { BROWSERD_NODE_LEASE_MS: '3000', BROWSERD_TEST_SWEEP_STALL_NODE: 'n1' },
      });
      c.expectLoss();
      const [n1, n2, n3] = c.nodes;
      try {
        const work = await startOrphanWork(c, n1, n2, web);
        await n1.kill9();
        let sweeper;
        await waitFor(() => {
          sweeper = [n2, n3].find((n) => /test switch: stalling after the sweep of node n1 /.test(n.log));
          return Boolean(sweeper);
        }, 'a node sweeps node 1 and stalls (the old binary has no such switch)', 30000, 100);
        await sweeper.kill9();
        const rest = sweeper === n2 ? n3 : n2;
        const problems = await orphansEnded(c, rest, work, 'node_lost', 60000);
        assert(problems.length === 0, `${problems.join('\n')}\n${rest.log.split('\n').filter((l) => /cluster:/.test(l)).join('\n')}`);
        assert(/did not end the records it left/.test(rest.log), `node ${rest.name} took over the claim: ${rest.log.split('\n').filter((l) => /cluster:/.test(l)).join('\n')}`);
      } finally {
        await c.stop();
        web.close();
      }
    },
  },
];
