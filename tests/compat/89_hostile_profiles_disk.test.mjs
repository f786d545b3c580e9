// Tenant fairness: the disk that saved profiles take (docs/profiles.md,
// limits.h LIM_PROFILE_ORG_BYTES). A plan without limits.max_profiles and
// max_profile_bytes (enterprise, the default organization's) let an
// organization keep any number of archives of up to 512 MiB each on the
// host's disk. Now its archives together are capped on each host
// (BROWSERD_PROFILE_ORG_MB lowers the cap for this test to 2 MiB): a save
// that would take it past its share is refused and the profile keeps its
// previous state; another organization's saves go on; deleting a profile
// makes room.
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, waitFor, newOrg, assertStartRefused } from '../blackbox/lib.mjs';

const ADMIN = 'profiles-disk-admin';
const api = (s, method, path, body, key) => request(s.base, method, path, { key, body });

const enterpriseOrg = async (s, name) => (await newOrg(s, ADMIN, { name, plan: 'enterprise' })).key;

async function profile(s, key, name) {
  const r = await api(s, 'POST', '/profiles', { name }, key);
  eq(r.status, 200, `profile ${name}: ${r.text}`);
  return r.json.id;
}

// A session on profile id whose page stores 1.5 MB of random bytes (they do
// not compress) in IndexedDB, in the profile's user-data folder; then the
// session is deleted: its state is saved into the profile, or refused.
// Returns the log line that says which.
async function saveJunk(s, site, key, id) {
  const c = await api(s, 'POST', '/browsers', { headless: true, profile: { id, save_changes: true } }, key);
  eq(c.status, 200, `create: ${c.text}`);
  const sid = c.json.session_id;
  const browser = await chromium.connectOverCDP(c.json.cdp_ws_url);
  try {
    const ctx = browser.contexts()[0];
    const page = ctx.pages()[0] || await ctx.newPage();
    await page.goto(site.url);
    const stored = await page.evaluate(() => new Promise((resolve, reject) => {
      const open = indexedDB.open('junk', 1);
      open.onupgradeneeded = () => open.result.createObjectStore('k');
      open.onerror = () => reject(open.error);
      open.onsuccess = () => {
        const bytes = new Uint8Array(1500000);
        for (let i = 0; i < bytes.length; i += 65536) crypto.getRandomValues(bytes.subarray(i, i + 65536));
        const tx = open.result.transaction('k', 'readwrite', { durability: 'strict' });
        tx.objectStore('k').put(bytes.buffer, 'junk');
        tx.oncomplete = () => resolve(bytes.length);
        tx.onerror = () => reject(tx.error);
      };
    }));
    eq(stored, 1500000, 'the junk was stored');
  } finally {
    await browser.close().catch(() => {});
  }
  eq((await api(s, 'DELETE', `/browsers/${sid}`, undefined, key)).status, 204);
  const re = new RegExp(`session ${sid}: (saved its state into profile ${id}|profile ${id} not saved: [^\\n]*)`);
  await waitFor(() => re.test(s.log), `the log says whether session ${sid} saved profile ${id}`, 60000);
  return s.log.match(re)[1];
}

export const tests = [
  {
    name: 'tenant fairness (disk): saved profile archives of one organization are capped on the host whatever its plan; a save past its share is refused and keeps the previous state, another organization still saves, a delete makes room',
    timeout: 240000,
    fn: async () => {
      const site = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<title>junk</title>'); });
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN, BROWSERD_PROFILE_ORG_MB: '2' }, args: site.allow });
      try {
        const a = await profile(s, s.key, 'a');
        const b = await profile(s, s.key, 'b');
        assert(/^saved/.test(await saveJunk(s, site, s.key, a)), 'the first profile is saved within the share');
        const refused = await saveJunk(s, site, s.key, b);
        assert(/not saved: .*organization's share/.test(refused), `the second save is refused for the share: ${refused}`);
        eq((await api(s, 'GET', `/profiles/${b}/download`, undefined, s.key)).status, 404, 'b keeps its previous state (none)');
        // a's archive: the 1.5 MB and about 50 KB of a fresh profile.
        eq((await api(s, 'GET', `/profiles/${a}/download`, undefined, s.key)).status, 200, 'a keeps its archive');
        const other = await enterpriseOrg(s, 'bystander');
        const c = await profile(s, other, 'c');
        assert(/^saved/.test(await saveJunk(s, site, other, c)), 'another organization saves within its own share');
        eq((await api(s, 'DELETE', `/profiles/${a}`, undefined, s.key)).status, 204, 'delete a');
        assert(/^saved/.test(await saveJunk(s, site, s.key, b)), 'after a delete, b is saved');
        eq((await api(s, 'GET', `/profiles/${b}/download`, undefined, s.key)).status, 200, 'b has its archive');
      } finally {
        await s.stop();
        s.cleanup();
        site.close();
      }
    },
  },
  {
    name: 'tenant fairness (disk): BROWSERD_PROFILE_ORG_MB may only lower the share (0, 8193 or not an integer stops the server at start, naming it)',
    fn: async () => assertStartRefused('BROWSERD_PROFILE_ORG_MB', ['0', '8193', 'x']),
  },
];
