// Issue 33.5 (KERNEL_API_NEWER.md 1.3): fields newer clients send and read on
// existing resources. Pools: region, fixed at create, returned, and a list
// filter. Telemetry: the opt-in platform category holds the in-session
// management calls (computer, fs, process, replays), split from control.
import { startServer, request, assert, eq, isError, waitFor, createSession, deleteSession } from '../blackbox/lib.mjs';

const api = (s, method, path, body) => request(s.base, method, path, { key: s.key, body });

async function events(s, id, category) {
  const r = await api(s, 'GET', `/browsers/${id}/telemetry/events?limit=100&category=${category}`);
  eq(r.status, 200, r.text);
  return r.json.map((e) => e.event);
}

export const tests = [
  {
    name: 'issue 33.5: a pool\'s region is stored at create (us-east when omitted), returned, fixed on PATCH, a ?region= list filter; an unknown region is a 400 naming region',
    timeout: 60000,
    fn: async () => {
      const s = await startServer({ args: ['--region', 'eu-west'] });
      try {
        const body = { size: 1, headless: true, fill_rate_per_minute: 0 };
        const p = await api(s, 'POST', '/browser_pools', { ...body, name: 'eu', region: 'eu-west' });
        eq(p.status, 200, p.text);
        eq(p.json.region, 'eu-west', 'region returned');
        assert(!('region' in p.json.browser_pool_config), 'region is the record\'s field, not a browser setting');
        eq((await api(s, 'GET', '/browser_pools/eu')).json.region, 'eu-west', 'region read back');
        // The service's default is us-east, which this node does not serve.
        const dflt = await api(s, 'POST', '/browser_pools', body);
        isError(dflt, 400, 'bad_request');
        assert(/region: this server serves only region eu-west/.test(dflt.json.message), dflt.text);
        const bad = await api(s, 'POST', '/browser_pools', { ...body, region: 'mars' });
        isError(bad, 400, 'bad_request');
        assert(/region: must be one of us-east, eu-west, ap-southeast/.test(bad.json.message), bad.text);
        // Fixed at create: the same value again is no change, another is refused.
        eq((await api(s, 'PATCH', '/browser_pools/eu', { region: 'eu-west' })).status, 200, 'same region');
        const moved = await api(s, 'PATCH', '/browser_pools/eu', { region: 'us-east' });
        isError(moved, 400, 'bad_request');
        assert(/region: is fixed when the pool is created/.test(moved.json.message), moved.text);
        // The list filter.
        eq((await api(s, 'GET', '/browser_pools?region=eu-west')).json.map((x) => x.name), ['eu'], '?region=eu-west');
        eq((await api(s, 'GET', '/browser_pools?region=us-east')).json, [], '?region=us-east');
        const badq = await api(s, 'GET', '/browser_pools?region=mars');
        isError(badq, 400, 'bad_request');
        assert(/region/.test(badq.json.message), badq.text);
        eq((await api(s, 'DELETE', '/browser_pools/eu')).status, 204);
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'issue 33.5: computer, fs, process and replays calls are api_call events of the opt-in platform category, not control',
    timeout: 60000,
    fn: async () => {
      const s = await startServer();
      try {
        const calls = async (id) => {
          const shot = await api(s, 'POST', `/browsers/${id}/computer/screenshot`, {});
          eq(shot.status, 200, `screenshot: ${shot.text.slice(0, 200)}`);
          eq((await api(s, 'GET', `/browsers/${id}/fs/file_info?path=/tmp`)).status, 200, 'fs');
          eq((await api(s, 'POST', `/browsers/${id}/process/exec`, { command: 'true' })).status, 200, 'process');
          // A refused start is a call too (status 400), and records nothing.
          eq((await api(s, 'POST', `/browsers/${id}/replays`, { framerate: 'fast' })).status, 400, 'replays');
        };
        // Telemetry on with its defaults: control is on, platform is not.
        const off = await createSession(s, { telemetry: {} });
        await calls(off);
        const control = (await events(s, off, 'control')).filter((e) => e.type === 'api_call');
        eq(control.map((e) => e.data.operation_id), [], 'no management call in control');
        eq(await events(s, off, 'platform'), [], 'platform is opt-in');
        // platform on: each call is there.
        const on = await createSession(s, { telemetry: { browser: { platform: { enabled: true } } } });
        await calls(on);
        const got = await waitFor(async () => {
          const evs = (await events(s, on, 'platform')).filter((e) => e.type === 'api_call');
          const ops = evs.map((e) => e.data.operation_id);
          return ['takeScreenshot', 'process.exec'].every((o) => ops.includes(o)) && ops.some((o) => /^fs\./.test(o)) &&
            ops.includes('startRecording') && evs;
        }, 'platform api_call events');
        assert(got.every((e) => e.category === 'platform'), JSON.stringify(got[0]));
        for (const x of [off, on]) await deleteSession(s, x);
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
];
