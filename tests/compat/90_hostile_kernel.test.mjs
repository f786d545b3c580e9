// Issue 29 items 10, 13 and 16, issue 31 item 7: a hostile tenant against the
// host's kernel and resources (docs/sandbox.md, "System calls" and "Tenant
// fairness: memory and pids"). Each probe is paired with a control that must
// succeed, so that a broken probe cannot pass.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { startServer, request, assert, eq, isError, waitFor } from '../blackbox/lib.mjs';

const api = (s, method, path, body, key) => request(s.base, method, path, { key: key || s.key, body });
const unb64 = (t) => Buffer.from(t || '', 'base64').toString('utf8');

async function withServer(opts, fn) {
  const s = await startServer(opts);
  try {
    assert(/sandbox: on/.test(s.log), `the server runs sessions sandboxed:\n${s.log}`);
    await fn(s);
  } finally { await s.stop(); s.cleanup(); }
}

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

async function exec(s, id, command, args = []) {
  const r = await api(s, 'POST', `/browsers/${id}/process/exec`, { command, args });
  eq(r.status, 200, `exec ${command}: ${r.text}`);
  return { code: r.json.exit_code, out: unb64(r.json.stdout_b64), err: unb64(r.json.stderr_b64) };
}

// Processes of a host uid, as {pid, cmd, status}.
function procsOf(uid) {
  const out = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const status = readFileSync(`/proc/${d}/status`, 'utf8');
      if (Number(/^Uid:\s+(\d+)/m.exec(status)[1]) !== uid) continue;
      out.push({ pid: Number(d), cmd: readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' '), status });
    } catch { /* gone */ }
  }
  return out;
}

const field = (status, name) => (new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status) || [])[1];

async function page(b) {
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  const ctx = br.contexts()[0];
  return { br, pg: ctx.pages()[0] || await ctx.newPage() };
}

async function pageText(pg, url) {
  for (let i = 0; i < 5; i++) {
    await pg.goto(url).catch(() => {});
    await pg.waitForLoadState('load').catch(() => {});
    const t = await pg.evaluate(() => document.body ? document.body.innerText : '').catch(() => '');
    if (t) return t;
  }
  return '';
}

// System calls a session process tries, each answering its errno (0: it worked).
const PROBE = `
import ctypes, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
params = ctypes.create_string_buffer(120)
res = {
  'keyctl': call(250, 0, -3, 0),                      # KEYCTL_GET_KEYRING_ID, session keyring
  'userfaultfd': call(323, 1),                        # UFFD_USER_MODE_ONLY
  'io_uring_setup': call(425, 1, ctypes.addressof(params)),
  'unshare_user': call(272, 0x10000000),              # CLONE_NEWUSER
}
try:
    socket.socket(17, socket.SOCK_RAW, 0); res['af_packet'] = 0
except OSError as e:
    res['af_packet'] = e.errno
try:
    socket.socket(16, socket.SOCK_RAW, 12); res['nf_netlink'] = 0   # NETLINK_NETFILTER
except OSError as e:
    res['nf_netlink'] = e.errno
try:
    socket.socket(16, socket.SOCK_RAW, 0).close(); res['route_netlink'] = 0
except OSError as e:
    res['route_netlink'] = e.errno
res['getpid'] = call(39)
print(json.dumps(res))
`;

const GIB = 1024 ** 3;
const memTotal = () => Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) * 1024;

async function otherOrg(s) {
  const admin = (method, path, body) => request(s.base, method, path, { key: 'h5-admin-token', body });
  const o = await admin('POST', '/admin/orgs', { name: 'neighbour', plan: 'enterprise' });
  eq(o.status, 201, `admin org: ${o.text}`);
  const k = await admin('POST', `/admin/orgs/${o.json.id}/api_keys`, { name: 'n' });
  eq(k.status, 201, `admin key: ${k.text}`);
  return k.json.key;
}

export const tests = [
  {
    name: 'issue 29.10: sessions\' memory limits are reserved against the host\'s memory times BROWSERD_MEMORY_OVERCOMMIT: past one org\'s share a 429, past the server\'s total a 503, both with Retry-After; an ended session gives its share back',
    timeout: 120000,
    // A budget of 3.5 GiB whatever the host: four 1 GiB sessions, nothing allocated.
    fn: () => withServer({ env: { BROWSERD_MEMORY_OVERCOMMIT: String((3.5 * GIB) / memTotal()), BROWSERD_ADMIN_TOKEN: 'h5-admin-token' } }, async (s) => {
      const mk = (key) => api(s, 'POST', '/browsers', { headless: true, memory: '1GiB' }, key);
      const a1 = await mk();
      eq(a1.status, 200, `control: the first session fits: ${a1.text}`);
      eq((await mk()).status, 200, 'a second 1 GiB session fits the org\'s 75% share');
      const listed = async () => (await api(s, 'GET', '/browsers?status=all')).json.length;
      const before = await listed();
      const over = await mk();
      isError(over, 429, 'rate_limited');
      assert(/memory/.test(over.json.message) && over.headers['retry-after'], `the 429 names memory and has Retry-After: ${over.text} ${JSON.stringify(over.headers)}`);
      eq(await listed(), before, 'a refused create leaves no session behind');
      const other = await otherOrg(s);
      eq((await mk(other)).status, 200, 'another org still gets its session');
      const full = await mk(other);
      isError(full, 503, 'server_at_capacity');
      assert(/memory/.test(full.json.message) && full.headers['retry-after'], `the 503 names memory and has Retry-After: ${full.text}`);
      eq((await api(s, 'DELETE', `/browsers/${a1.json.session_id}`)).status, 204, 'end one session');
      let r;
      await waitFor(async () => (r = await mk(other)).status === 200 || (r.status !== 503 && r.status !== 429 && assert(false, r.text)), 'the ended session\'s memory to be given back', 30000, 200);
    }),
  },
  {
    name: 'issue 29.10: the server protects itself: its oom_score_adj is low, its sessions\' processes high, and the sessions\' parent cgroup is capped below the host\'s memory',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const adj = (pid) => Number(readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8'));
      // Lowering a score takes CAP_SYS_RESOURCE (a container may withhold it).
      const capResource = (BigInt(`0x${/^CapEff:\s+(\w+)/m.exec(readFileSync('/proc/self/status', 'utf8'))[1]}`) >> 24n) & 1n;
      if (capResource) assert(adj(s.proc.pid) < 0, `the server's oom_score_adj is below 0: ${adj(s.proc.pid)}`);
      const b = await create(s);
      const inside = await exec(s, b.session_id, 'sh', ['-c', 'id -u; cat /proc/self/oom_score_adj']);
      const [uid, own] = inside.out.trim().split('\n').map(Number);
      eq(own, 1000, 'a session process is the kernel\'s first choice under memory pressure');
      const procs = procsOf(uid);
      const launcher = procs.find((p) => p.cmd.startsWith('/usr/bin/bwrap ') && p.cmd.includes('/usr/lib/chromium/chromium'));
      assert(launcher, `the session's browser launcher: ${procs.map((p) => p.cmd.slice(0, 60)).join('\n')}`);
      // Without CAP_SYS_RESOURCE Chromium lowers its own processes: the sandbox
      // starts at the renderers' 300, so that it never outranks them (issue 30.6).
      eq(adj(launcher.pid), capResource ? 1000 : 300, 'the browser\'s sandbox starts at 1000 (300 where Chromium may lower its own processes)');
      // Written by a root with CAP_SYS_RESOURCE, 1000 is also the floor: Chromium cannot lower its browser back.
      const browser = procs.find((p) => p.cmd.startsWith('/usr/lib/chromium/chromium ') && !p.cmd.includes('--type='));
      if (capResource) eq(adj(browser.pid), 1000, 'the session\'s browser stays at 1000');
      assert(adj(s.proc.pid) < 1000, 'the server is chosen after its sessions');
      const cap = ['/sys/fs/cgroup/memory/browserd/memory.limit_in_bytes', '/sys/fs/cgroup/browserd/memory.max']
        .map((f) => { try { return Number(readFileSync(f, 'utf8')); } catch { return NaN; } }).find((v) => !Number.isNaN(v));
      assert(cap > 0 && cap < memTotal(), `the sessions' parent cgroup is capped below MemTotal ${memTotal()}: ${cap}`);
    }),
  },
  {
    name: 'issue 29.13: a session process cannot make a user namespace (unshare -Urnm fails) and gets EPERM from keyctl, userfaultfd, io_uring, packet and nf_tables sockets; routing netlink still works',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const b = await create(s);
      const ctl = await exec(s, b.session_id, 'true');
      eq(ctl.code, 0, 'control: a plain command runs');
      const u = await exec(s, b.session_id, 'unshare', ['-Urnm', 'true']);
      assert(u.code !== 0, `unshare -Urnm must fail inside a session: exit ${u.code} ${u.err}`);
      const st = await exec(s, b.session_id, 'cat', ['/proc/self/status']);
      eq(field(st.out, 'Seccomp'), '2', `a session process runs under a seccomp filter:\n${st.out}`);
      const p = await exec(s, b.session_id, '/usr/bin/python3', ['-c', PROBE]);
      eq(p.code, 0, `probe: ${p.err}`);
      const r = JSON.parse(p.out);
      eq(r.getpid, 0, 'control: an ordinary system call works');
      eq(r.route_netlink, 0, 'control: a routing netlink socket opens');
      for (const k of ['keyctl', 'userfaultfd', 'io_uring_setup', 'unshare_user', 'af_packet', 'nf_netlink'])
        eq(r[k], 1, `${k} is refused with EPERM (${JSON.stringify(r)})`);
    }),
  },
  {
    name: 'issue 29.13: Chromium keeps its own sandbox under the server\'s filter: renderers show Seccomp 2 with two filters in a user namespace of their own, the browser process runs filtered, pages work',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const b = await create(s);
      const uid = Number((await exec(s, b.session_id, 'id', ['-u'])).out.trim());
      const { br, pg } = await page(b);
      try {
        eq(await pg.evaluate(() => 6 * 7), 42, 'a page runs script');
        const sbx = await pageText(pg, 'chrome://sandbox');
        assert(/adequately sandboxed/i.test(sbx), `chrome://sandbox says the renderer is sandboxed:\n${sbx}`);
        const ps = procsOf(uid).filter((p) => p.cmd.startsWith('/usr/lib/chromium/chromium '));
        const renderers = ps.filter((p) => p.cmd.includes('--type=renderer'));
        const browser = ps.find((p) => !p.cmd.includes('--type='));
        assert(browser && renderers.length > 0, `the session's browser and renderers: ${ps.map((p) => p.cmd.slice(0, 80)).join('\n')}`);
        eq(field(browser.status, 'Seccomp'), '2', 'the browser process runs under the server\'s filter');
        const userns = (pid) => readlinkSync(`/proc/${pid}/ns/user`);
        for (const r of renderers) {
          eq(field(r.status, 'Seccomp'), '2', `renderer ${r.pid} is in seccomp filter mode`);
          assert(Number(field(r.status, 'Seccomp_filters')) >= 2, `renderer ${r.pid}: Chromium's filter on top of the server's:\n${r.status}`);
          assert(userns(r.pid) !== userns(browser.pid), `renderer ${r.pid} is in Chromium's own user namespace`);
        }
      } finally { await br.close(); }
    }),
  },
  {
    name: 'issue 29.16: chrome://version and a session process\'s mount table show no host path of the data folder; the profile is at a neutral path',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const b = await create(s);
      const { br, pg } = await page(b);
      try {
        const v = await pageText(pg, 'chrome://version');
        assert(/--user-data-dir=/.test(v), `control: chrome://version shows the command line:\n${v}`);
        assert(!v.includes(s.dir), `chrome://version names the host data folder ${s.dir}:\n${v}`);
        assert(/--user-data-dir=\/profile\b/.test(v), `the profile is at /profile:\n${v}`);
      } finally { await br.close(); }
      const m = await exec(s, b.session_id, 'cat', ['/proc/self/mountinfo']);
      assert(/ \/tmp /.test(m.out), `control: the mount table lists /tmp:\n${m.out}`);
      assert(!m.out.includes(s.dir), `the mount table names the host data folder:\n${m.out}`);
    }),
  },
  {
    name: 'issue 31.7 and 29.16: logs/stream?source=path takes the session\'s own path (/tmp/x/app.log, written by a session process); a refused path answers without a host path',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const b = await create(s);
      const id = b.session_id;
      const w = await exec(s, id, 'sh', ['-c', 'mkdir -p /tmp/x && echo hello-from-the-session > /tmp/x/app.log']);
      eq(w.code, 0, `writing the log: ${w.err}`);
      const get = (path) => request(s.base, 'GET', `/browsers/${id}/logs/stream?source=path&follow=false&path=${encodeURIComponent(path)}`, { key: s.key });
      const r = await get('/tmp/x/app.log');
      eq(r.status, 200, `the session's own log streams: ${r.text}`);
      assert(r.text.includes('hello-from-the-session'), `the log's line is streamed: ${r.text}`);
      for (const [path, status] of [['/tmp/x/missing.log', 404], ['/etc/passwd', 404], ['/tmp/../../../etc/shadow', 404], ['/tmp/x', 400]]) {
        const e = await get(path);
        isError(e, status);
        assert(!e.text.includes(s.dir), `the answer for ${path} names the host data folder: ${e.text}`);
      }
    }),
  },
];
