// Red team 45b (docs/sandbox.md "CPU per organization"): every session has a
// cpu group of its own, and groups of equal weight share a busy CPU equally,
// so an organization with N busy sessions would take N parts to another's
// one. The weight of an organization's foreground groups is divided among
// them (LIM_CPU_SHARES_PER_ORG on cgroup v1, LIM_CPU_WEIGHT_PER_ORG on v2).
// Read from the groups' own files: an outcome, never a time.
import { readFileSync, existsSync } from 'node:fs';
import { withServer, createSession, deleteSession, newOrg, eq, waitFor, sessionCgroupDirs } from '../blackbox/lib.mjs';

const ADMIN = 'redteam-cpu-admin';

// The session's CPU weight: cpu.shares of its v1 cpu group, or cpu.weight of
// its v2 group; null when this host gives sessions no cpu group.
function weight(id) {
  for (const d of sessionCgroupDirs(id)) {
    for (const f of ['cpu.shares', 'cpu.weight']) {
      const p = `${d}/${f}`;
      if (existsSync(p)) return { file: f, value: Number(readFileSync(p, 'utf8').trim()) };
    }
  }
  return null;
}

export const tests = [
  {
    name: 'red team 45b: CPU is shared per organization: three sessions of one organization each get a third of its weight (1024/3 cpu.shares, or 100/3 cpu.weight) while another organization\'s one session keeps the whole; when one of the three ends, the other two get half each',
    timeout: 180000,
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      const b = await newOrg(s, ADMIN, { name: 'cpu-b' });
      const a = [await createSession(s), await createSession(s), await createSession(s)];
      const other = await createSession(s, {}, b.key);
      const w0 = weight(other);
      if (!w0) return; // no cpu group on this host: nothing to share
      const whole = w0.file === 'cpu.shares' ? 1024 : 100;
      const part = (n) => Math.max(w0.file === 'cpu.shares' ? 2 : 1, Math.floor(whole / n));
      await waitFor(() => a.every((id) => weight(id)?.value === part(3)), `each of the three at ${part(3)}: ${JSON.stringify(a.map(weight))}`);
      eq(weight(other).value, whole, `the other organization's one session keeps ${whole}`);
      await deleteSession(s, a[0]);
      await waitFor(() => a.slice(1).every((id) => weight(id)?.value === part(2)), `the two left at ${part(2)}: ${JSON.stringify(a.slice(1).map(weight))}`);
      eq(weight(other).value, whole, 'the other organization is untouched');
      for (const id of [...a.slice(1)]) await deleteSession(s, id);
      await deleteSession(s, other, b.key);
    }),
  },
];
