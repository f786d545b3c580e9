// Issue h7.3: more lifecycle paths on a busy host. Each test runs inside
// withLoad with `stress-ng --cpu 2 --vm 1 --vm-bytes 256M` (started before
// the test's work and ended by its PID after it) and asserts outcomes, never
// times: an MCP session ended takes its browser with it; a classic WebDriver
// session of a pool quit gives its browser back to the pool, reusable; a REPL
// killed by its timeout is replaced by a new one and the session still works;
// the audit entries acknowledged before a kill -9 of the server are all
// stored after the restart. (A profile saved by a session ended during load:
// 91_lifecycle_load, issue 30.1.) Pages are served on 127.0.0.1.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Builder } from 'selenium-webdriver';
import { startServer, withServer, startSite, request, assert, eq, waitFor, withLoad, createSession, sessionPids, sessionCgroupDirs } from '../blackbox/lib.mjs';

const LOAD = { stressors: ['--cpu', '2', '--vm', '1', '--vm-bytes', '256M'], workers: 3, seconds: 150 };
const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });
const page = () => startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end('<!doctype html><title>busy page</title><p id=p>here</p>'); });
const active = async (s) => {
  const r = await api(s, 'GET', '/browsers');
  eq(r.status, 200, r.text);
  return r.json.map((b) => b.session_id);
};

export const tests = [
  {
    name: 'issue h7.3: on a busy host an MCP session ended (DELETE /mcp) ends its browser: the session is deleted, its processes and cgroups are gone',
    timeout: 110000,
    fn: async () => {
      const site = await page();
      try {
        await withServer({ args: site.allow }, (s) => withLoad(async () => {
          const client = new Client({ name: 'browserd-busy', version: '1.0.0' });
          const transport = new StreamableHTTPClientTransport(new URL(`${s.base}/mcp`),
            { requestInit: { headers: { Authorization: `Bearer ${s.key}` } } });
          await client.connect(transport);
          const nav = await client.callTool({ name: 'navigate', arguments: { url: `${site.url}/` } });
          assert(!nav.isError, `navigate: ${JSON.stringify(nav).slice(0, 300)}`);
          const ids = await active(s);
          eq(ids.length, 1, 'one browser for the MCP session');
          const id = ids[0];
          assert(sessionPids(s.dir, id).length > 0, 'its browser runs');
          await transport.terminateSession();
          await client.close();
          await waitFor(async () => (await active(s)).length === 0, 'the browser session ended with the MCP session', 60000, 250);
          const rec = await api(s, 'GET', `/browsers/${id}?include_deleted=true`);
          assert(rec.status === 404 || rec.json.deleted_at, `the session is deleted: ${rec.text}`);
          await waitFor(() => sessionPids(s.dir, id).length === 0, 'no process of the ended browser', 60000, 250);
          await waitFor(() => sessionCgroupDirs(id).length === 0, 'no cgroup of the ended browser', 60000, 250);
        }, LOAD));
      } finally { site.close(); }
    },
  },
  {
    name: 'issue h7.3: on a busy host a classic WebDriver session of a pool quit gives the browser back to its pool, and the next WebDriver session gets that browser and drives it',
    timeout: 110000,
    fn: () => withServer({}, (s) => withLoad(async () => {
      const p = await api(s, 'POST', '/browser_pools', { name: 'busypool', size: 1, headless: true, fill_rate_per_minute: 6000 });
      eq(p.status, 200, p.text);
      const avail = async () => (await api(s, 'GET', '/browser_pools/busypool')).json.available_count;
      await waitFor(async () => (await avail()) === 1, 'the pool filled', 60000, 250);
      const driver = () => new Builder().usingServer(`http://${s.key}@127.0.0.1:${s.port}/wd/hub`)
        .withCapabilities({ browserName: 'chrome', 'browserd:options': { headless: true, pool: 'busypool' } }).build();
      const ids = [];
      for (let round = 0; round < 2; round++) {
        const d = await driver();
        try {
          const id = (await d.getSession()).getId();
          ids.push(id);
          const rec = (await api(s, 'GET', `/browsers/${id}`)).json;
          eq(rec.pool && rec.pool.id, p.json.id, `round ${round}: acquired from the pool: ${JSON.stringify(rec.pool)}`);
          eq(await avail(), 0, `round ${round}: the pool lent its browser`);
          eq(await d.executeScript('return 6 * 7'), 42, `round ${round}: the browser is driven`);
        } finally { await d.quit(); }
        await waitFor(async () => (await avail()) === 1, `round ${round}: released back to the pool`, 60000, 250);
        const back = await api(s, 'GET', `/browsers/${ids[round]}`);
        eq(back.status, 200, `round ${round}: the pool browser lives on: ${back.text}`);
        assert(!back.json.deleted_at, `round ${round}: not ended by quit: ${back.text}`);
      }
      eq(ids[1], ids[0], 'the second WebDriver session reused the browser the first gave back');
      eq((await api(s, 'DELETE', '/browser_pools/busypool', { force: true })).status, 204);
    }, LOAD)),
  },
  {
    name: 'issue h7.3: on a busy host a REPL killed by its timeout is terminated; the next call gets a new repl_id with fresh state, and the session still drives its page',
    timeout: 110000,
    fn: async () => {
      const site = await page();
      try {
        await withServer({ args: site.allow }, (s) => withLoad(async () => {
          const id = await createSession(s);
          const repl = (body) => api(s, 'POST', `/browsers/${id}/repl`, body);
          let r = await repl({ code: 'var kept = 5' });
          eq(r.status, 200, r.text);
          eq(r.json.success, true, r.text);
          const first = r.json.repl_id;
          r = await repl({ code: 'for (;;) {}', timeout_sec: 2 });
          eq(r.status, 200, r.text);
          eq(r.json.success, false, r.text);
          eq(r.json.repl_terminated, true, `the timeout ends the REPL: ${r.text}`);
          r = await repl({ code: `repl.write(typeof kept); await gotoUrl(${JSON.stringify(`${site.url}/`)}); repl.write(' ' + (await pageInfo()).title)` });
          eq(r.status, 200, r.text);
          eq(r.json.success, true, r.text);
          assert(r.json.repl_id && r.json.repl_id !== first, `a new repl_id after the timeout: ${first} then ${r.json.repl_id}`);
          const out = (r.json.content || []).filter((c) => c.type === 'text' && c.channel === 'write').map((c) => c.text).join('');
          eq(out, 'undefined busy page', 'fresh state, and the session drives its page');
          // The timed-out REPL's process is gone: one REPL (node) process
          // in the session's sandbox, the new one.
          const repls = () => sessionPids(s.dir, id).filter((pid) => {
            try { return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'node'; } catch { return false; }
          });
          await waitFor(() => repls().length === 1, `one REPL process left in the session (${repls().length})`, 30000, 250);
          const rec = await api(s, 'GET', `/browsers/${id}`);
          eq(rec.status, 200, rec.text);
          assert(!rec.json.deleted_at, 'the session lives on');
          const del = await api(s, 'DELETE', `/browsers/${id}`);
          assert(del.status === 200 || del.status === 204, del.text);
        }, LOAD));
      } finally { site.close(); }
    },
  },
  {
    name: 'issue h7.3: on a busy host the audit entries of the changes acknowledged before kill -9 of the server (held in the spool: the store refused them) are all stored, once each, after the restart',
    timeout: 110000,
    fn: async () => {
      const tmp = mkdtempSync(join(tmpdir(), 'browserd-outage-'));
      const outage = join(tmp, 'outage');
      const s1 = await startServer({ env: { BROWSERD_TEST_AUDIT_OUTAGE_FILE: outage } });
      let s2;
      try {
        const N = 40;
        await withLoad(async () => {
          writeFileSync(outage, '');
          for (let i = 0; i < N; i++) {
            const r = await api(s1, 'POST', '/profiles', { name: `busy${i}` });
            eq(r.status, 200, `change ${i}: ${r.text}`);
          }
          await s1.stop('SIGKILL');
          rmSync(outage);
          s2 = await startServer({ dataDir: s1.dir });
        }, LOAD);
        const window = `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;
        const r = await api(s2, 'GET', `/audit-logs?${window}&limit=100`);
        eq(r.status, 200, r.text);
        const creates = r.json.filter((e) => e.method === 'POST' && e.path === '/profiles' && e.status === 200);
        eq(creates.length, N, `every acknowledged change has its entry once: ${creates.length} of ${N}`);
        const names = await api(s2, 'GET', '/profiles');
        eq(names.status, 200, names.text);
      } finally {
        await s1.stop();
        if (s2) await s2.stop();
        s1.cleanup();
        rmSync(tmp, { recursive: true, force: true });
      }
    },
  },
];
