// Issue h4: record-count caps of an organization hold across a cluster.
// Credentials (LIM_CREDENTIALS_PER_ORG), auth connections
// (LIM_AUTHCONN_PER_ORG), vaults (LIM_VAULTS_PER_ORG), credential providers
// (LIM_CREDPROV_PER_ORG) and OTLP destinations (LIM_OTLP_DESTS_PER_ORG) were
// counted before the insert, each node serializing only its own creates: a
// tenant firing many creates at once at both nodes ended above its cap. The
// store now counts and inserts under the org's row lock.
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^44_record_caps'
import { request, assert, eq } from '../blackbox/lib.mjs';
import { startCluster } from './lib.mjs';

const K = 6;          // free places left under each cap
const BURST = 4 * K;  // creates fired at once, half at each node
const ROUNDS = 3;     // bursts per kind (the rows of the one before deleted)

// One kind of record: its create path, a body for create i, the cap, the
// status the single-node path answers over the cap, and how to fill the
// org's rows up to cap - K with psql (the count is of rows, so a filler
// row's content does not matter).
const KINDS = [
  {
    what: 'credentials', path: '/credentials', cap: 1000, over: 429,
    body: (i) => ({ name: `burst-${i}`, domain: 'example.com', values: { password: 'p' } }),
    table: 'credentials', where: '',
    fill: (org, project, n) => `INSERT INTO credentials (id, org_id, project_id, name, domain, created_at, updated_at, data)
      SELECT 'fill-' || g, '${org}', '${project}', 'fill-' || g, 'example.com', 0, 0, '{}' FROM generate_series(1, ${n}) g`,
  },
  {
    what: 'auth connections', path: '/auth/connections', cap: 1000, over: 429,
    body: (i) => ({ domain: `burst${i}.example.com`, profile_name: 'burst' }),
    table: 'auth_connections', where: '',
    fill: (org, project, n) => `INSERT INTO auth_connections (id, org_id, project_id, profile_name, domain, created_at, updated_at, data)
      SELECT 'fill-' || g, '${org}', '${project}', 'fill', 'fill' || g || '.example.com', 0, 0, '{}' FROM generate_series(1, ${n}) g`,
  },
  {
    what: 'vaults', path: '/vaults', cap: 100, over: 403,
    body: (i) => ({ name: `burst-${i}` }),
    table: 'vaults', where: " AND vault_id = ''",
    fill: (org, project, n) => `INSERT INTO vaults (id, org_id, project_id, vault_id, name, type, version, created_at, updated_at, data)
      SELECT 'fill-v' || g, '${org}', '${project}', '', 'fill-' || g, 'vault', 1, 0, 0, '{}' FROM generate_series(1, ${n}) g`,
  },
  {
    what: 'credential providers', path: '/org/credential_providers', cap: 20, over: 429,
    body: (i) => ({ name: `burst-${i}`, provider_type: 'onepassword', token: `ops_burst_${i}` }),
    table: 'vaults', where: " AND vault_id = 'credential_provider'",
    fill: (org, project, n) => `INSERT INTO vaults (id, org_id, project_id, vault_id, name, type, version, created_at, updated_at, data)
      SELECT 'fill-p' || g, '${org}', '${project}', 'credential_provider', 'fill-p' || g, 'provider', 1, 0, 0, '{}' FROM generate_series(1, ${n}) g`,
  },
  {
    what: 'OTLP destinations', path: '/org/telemetry/destinations', cap: 10, over: 409,
    body: (i) => ({ name: `burst-${i}`, endpoint: `http://collector${i}.example.com/v1/logs` }),
    table: 'otlp_destinations', where: '',
    fill: (org, project, n) => `INSERT INTO otlp_destinations (id, org_id, name, endpoint, headers, created_at, updated_at)
      SELECT 'fill-' || g, '${org}', 'fill-' || g, 'http://fill.example.com/v1/logs', '{}', 0, 0 FROM generate_series(1, ${n}) g`,
  },
];

export const tests = [
  {
    name: `issue h4: ${ROUNDS} bursts of ${BURST} creates fired at once at both nodes of an organization ${K} below its cap store ${K} more at most (credentials, auth connections, vaults, credential providers, OTLP destinations); the others are refused as on one node`,
    timeout: 180000,
    fn: async () => {
      const c = await startCluster({ nodes: 2 });
      const [n1, n2] = c.nodes;
      try {
        // The org and project of the key: those of a first credential.
        const first = await request(n1.base, 'POST', '/credentials', { key: c.key, body: { name: 'first', domain: 'example.com', values: { password: 'p' } } });
        eq(first.status, 200, `first credential: ${first.text}`);
        const [[org, project]] = await c.psql(`SELECT org_id, project_id FROM credentials WHERE id = '${first.json.id}'`);
        await c.psql(`DELETE FROM credentials WHERE org_id = '${org}'`);
        const over = [];
        for (const k of KINDS) {
          await c.psql(k.fill(org, project, k.cap - K));
          for (let round = 0; round < ROUNDS; round++) {
            await c.psql(`DELETE FROM ${k.table} WHERE org_id = '${org}'${k.where} AND id NOT LIKE 'fill-%'`);
            const answers = await Promise.all(Array.from({ length: BURST }, (_, i) =>
              request((i % 2 ? n2 : n1).base, 'POST', k.path, { key: c.key, body: k.body(`${round}-${i}`) })));
            const [[stored]] = await c.psql(`SELECT count(*) FROM ${k.table} WHERE org_id = '${org}'${k.where}`);
            const ok = answers.filter((r) => r.status === 200).length;
            const refused = answers.filter((r) => r.status !== 200);
            for (const r of refused) {
              eq(r.status, k.over, `${k.what}: a create over the cap answers as on one node: ${r.text}`);
              assert(/limit_exceeded/.test(r.text), `${k.what}: names the limit: ${r.text}`);
              if (k.over === 429) assert(Number(r.headers['retry-after']) > 0, `${k.what}: Retry-After ${r.headers['retry-after']}`);
            }
            eq(ok + refused.length, BURST, `${k.what}: every create answered`);
            if (Number(stored) !== k.cap || ok !== K) over.push(`${k.what}, burst ${round + 1}: ${stored} stored for a cap of ${k.cap} (${ok} creates of ${BURST} taken, ${K} free)`);
          }
        }
        eq(over.length, 0, `each cap holds across the nodes:\n${over.join('\n')}`);
      } finally {
        await c.stop();
      }
    },
  },
];
