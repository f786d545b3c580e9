// WebMCP's side inside the session's sandbox (src/api/webmcp.c, docs/webmcp.md).
// Not a module: runtime-js/webmcp-runner.mjs (the server's calls) and the
// REPL (webmcp.* globals) load it with new Function and call
//   __wm_main(await __wm_connect(<DevTools ws URL>), request, env?)
// Requests: {op: "list", custom: [...], exclude_custom, custom_frames}, {op: "invoke", ref,
// input, timeout_ms, custom?}, {op: "define", source}. The answer is one bounded
// JSON record; a page's output past __WM_OUT_CAP bytes is an error, a
// CDP-backed custom tool's past __WM_CDP_OUT_CAP. env.replHelpers() gives
// the REPL's helpers (runtime-js/repl.mjs) for CDP-backed custom tools. The DevTools
// client is node's WebSocket (--experimental-websocket on node 20): playwright's
// connectOverCDP would wait for every page, a page that never yields included.

const __WM_OUT_CAP = 960 * 1024; // LIM_WEBMCP_OUTPUT_BYTES
const __WM_CDP_OUT_CAP = 240 * 1024; // LIM_WEBMCP_CDP_OUTPUT_BYTES
const __WM_TAB_MS = 5000; // the most a tools list waits for one tab
const __WM_OOPIFS = 64; // out-of-process frames read per tab

// A DevTools connection: send(method, params, sessionId?), on(fn) for every event.
async function __wm_connect(url) {
  const ws = new WebSocket(url);
  await new Promise((ok, no) => {
    ws.onopen = ok;
    ws.onerror = () => no(new Error('the DevTools connection failed'));
  });
  let next = 1;
  const calls = new Map();
  const subs = new Set();
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.id === undefined) {
      for (const f of subs) f(msg);
      return;
    }
    const c = calls.get(msg.id);
    if (!c) return;
    calls.delete(msg.id);
    if (msg.error) c.no(new Error(msg.error.message));
    else c.ok(msg.result);
  };
  ws.onclose = () => {
    for (const c of calls.values()) c.no(new Error('the DevTools connection closed'));
    calls.clear();
  };
  return {
    send(method, params = {}, sessionId) {
      const id = next++;
      ws.send(JSON.stringify(sessionId ? { id, method, params, sessionId } : { id, method, params }));
      return new Promise((ok, no) => calls.set(id, { ok, no }));
    },
    on(fn) {
      subs.add(fn);
    },
    close() {
      ws.close();
    },
  };
}

// One tab's session, shaped like a CDP session: send(method, params), on(event, fn), detach().
function __wm_session(conn, sessionId) {
  return {
    send: (method, params) => conn.send(method, params, sessionId),
    on: (event, fn) => conn.on((m) => m.sessionId === sessionId && m.method === event && fn(m.params)),
    detach: () => conn.send('Target.detachFromTarget', { sessionId }),
  };
}

// A tool_ref: the 64-bit FNV-1a hashes of the tab's target id, the frame's
// id, the frame's document (loader id) and, for a page's tool, its name, in
// base64url: 43 characters (a custom tool's ref is "ct_<id>." and 32), under
// the 128 the hosted service's MCP server accepts for a tool_ref. A ref is
// resolved by hashing what is there now: a document that went is not found.
function __wm_h(s) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(String(s))) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h.toString(16).padStart(16, '0');
}

function __wm_ref(o) {
  return Buffer.from(__wm_h(o.t) + __wm_h(o.f) + __wm_h(o.l) + (o.n === undefined ? '' : __wm_h(o.n)), 'hex').toString('base64url');
}

function __wm_unref(s) {
  if (!/^[A-Za-z0-9_-]+$/.test(s)) return null;
  const x = Buffer.from(s, 'base64url').toString('hex');
  if (x.length !== 48 && x.length !== 64) return null;
  return { t: x.slice(0, 16), f: x.slice(16, 32), l: x.slice(32, 48), n: x.length === 64 ? x.slice(48) : undefined };
}

// A URL pattern: '*' matches any run of characters, the rest literally,
// against the whole URL.
function __wm_match(patterns, url) {
  return patterns.some((p) => {
    const re = '^' + String(p).split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$';
    return new RegExp(re).test(url);
  });
}

// Every tab: its CDP session, target id, window id, title, frames by id.
async function __wm_tabs(conn) {
  const tabs = [];
  const { targetInfos } = await conn.send('Target.getTargets');
  for (const info of targetInfos.filter((t) => t.type === 'page')) {
    let s;
    try {
      // A page that does not answer (a busy main thread) is left out.
      const late = new Promise((_, no) => setTimeout(() => no(new Error('late')), __WM_TAB_MS));
      const { sessionId } = await Promise.race([conn.send('Target.attachToTarget', { targetId: info.targetId, flatten: true }), late]);
      s = __wm_session(conn, sessionId);
      const send = (m, p) => Promise.race([s.send(m, p), late]);
      let windowId = null;
      try {
        windowId = (await Promise.race([conn.send('Browser.getWindowForTarget', { targetId: info.targetId }), late])).windowId;
      } catch {}
      const frames = new Map();
      // sub: the frame's own CDP session when it is out of process (another
      // site's iframe: a target of its own); undefined: the tab's.
      const walk = (node, parent, sub) => {
        frames.set(node.frame.id, { url: node.frame.url, loaderId: node.frame.loaderId, parent, sub });
        for (const c of node.childFrames || []) walk(c, node.frame.id, sub);
      };
      // The tab's out-of-process frames are attached to its session, and
      // theirs to theirs (auto-attach reports the existing ones before it
      // answers), at most __WM_OOPIFS per tab. The parent of one is the
      // target that embeds it (its main frame's id is the target's id).
      const oopifs = [];
      const watch = (sid, parentTarget) =>
        conn.on((m) => m.sessionId === sid && m.method === 'Target.attachedToTarget' &&
          m.params.targetInfo.type === 'iframe' && oopifs.push({ ...m.params, parentTarget }));
      const autoAttach = (x) => Promise.race([x.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true }), late]);
      watch(sessionId, info.targetId);
      await autoAttach(s);
      walk((await send('Page.getFrameTree')).frameTree, null, undefined);
      for (let i = 0; i < oopifs.length && i < __WM_OOPIFS; i++) {
        const o = oopifs[i];
        try {
          const sub = { ...__wm_session(conn, o.sessionId), targetId: o.targetInfo.targetId };
          watch(o.sessionId, sub.targetId);
          await autoAttach(sub);
          const tree = (await Promise.race([sub.send('Page.getFrameTree'), late])).frameTree;
          walk(tree, o.parentTarget, sub);
        } catch {
          // An iframe going away while it is looked at is not listed.
        }
      }
      tabs.push({ s, targetId: info.targetId, windowId, title: info.title, url: info.url, frames });
    } catch {
      // A tab closing while it is looked at is not listed.
      if (s) s.detach().catch(() => {});
    }
  }
  return tabs;
}

// The tools the tab's documents registered (WebMCP.enable reports them all).
// Each tool keeps the CDP session of its frame's target (__s: the tab's, or
// an out-of-process frame's, where the WebMCP domain is enabled on its own).
async function __wm_native(tab, { titles = true } = {}) {
  const tools = [];
  const subs = [...new Set([...tab.frames.values()].map((f) => f.sub).filter(Boolean))];
  for (const s of [tab.s, ...subs]) {
    s.on('WebMCP.toolsAdded', (ev) => tools.push(...ev.tools.map((t) => ({ ...t, __s: s }))));
    s.on('WebMCP.toolsRemoved', (ev) => {
      for (const r of ev.tools) {
        const i = tools.findIndex((t) => t.name === r.name && t.frameId === r.frameId);
        if (i >= 0) tools.splice(i, 1);
      }
    });
    try {
      await s.send('WebMCP.enable');
      // One more round trip: the events enable fires come before its answer's successor.
      await s.send('Runtime.evaluate', { expression: '0' });
    } catch (e) {
      if (s === tab.s) throw e; // an iframe that went away has no tools
    }
  }
  // Chromium 156's enable reports the main frame's tools only (those a child
  // frame registers later are reported): a child frame's are asked from its
  // document (getTools, its own tools only), in a world of ours. The
  // DevTools events carry no title: every frame's document is asked for its
  // tools' titles the same way.
  for (const [frameId, f] of tab.frames) {
    const s = f.sub ?? tab.s;
    const root = f.parent === null || (f.sub && f.sub.targetId === frameId);
    if (root && !titles) continue; // an invocation needs no titles
    try {
      const { executionContextId } = await s.send('Page.createIsolatedWorld', { frameId, worldName: 'browserd-webmcp' });
      const r = await s.send('Runtime.evaluate', {
        contextId: executionContextId,
        awaitPromise: true,
        returnByValue: true,
        expression: `(async () => !document.modelContext ? [] : (await document.modelContext.getTools())
          .filter((t) => t.window === window)
          .map((t) => { const f = [...document.forms].find((x) => x.getAttribute('toolname') === String(t.name));
            return { name: String(t.name), description: String(t.description ?? ''), inputSchema: t.inputSchema ?? undefined,
              title: typeof t.title === 'string' && t.title ? t.title : undefined,
              form: !!f, annotations: f ? { autosubmit: f.hasAttribute('toolautosubmit') } : undefined }; }))()`,
      });
      for (const t of Array.isArray(r.result?.value) ? r.result.value : []) {
        const known = tools.find((x) => x.name === t.name && x.frameId === frameId);
        if (known) {
          if (t.title !== undefined) known.title = t.title;
        } else if (!root) tools.push({ ...t, frameId, __s: s, __ctx: executionContextId });
      }
    } catch {}
  }
  return tools;
}

function __wm_source(tab, frameId, custom) {
  const f = tab.frames.get(frameId);
  const top = frameId === tab.targetId || !f || f.parent === null;
  return {
    window_id: tab.windowId,
    tab_id: tab.targetId,
    page_url: tab.url,
    page_title: tab.title,
    frame: top ? null : { frame_id: frameId, url: f.url },
    target_id: f && f.sub ? f.sub.targetId : tab.targetId, // an out-of-process frame's own target
    ...(custom ? { custom } : {}),
  };
}

function __wm_tool(t) {
  const a = t.annotations || {};
  const tool = { name: t.name, description: t.description ?? '', inputSchema: t.inputSchema ?? { type: 'object' } };
  if (typeof t.title === 'string') tool.title = t.title;
  const ann = {};
  if (a.readOnly !== undefined) ann.readOnlyHint = a.readOnly;
  if (a.untrustedContent !== undefined) ann.untrustedContentHint = a.untrustedContent;
  if (a.consequential !== undefined) ann.consequentialHint = a.consequential;
  if (t.backendNodeId !== undefined || t.form) ann.autosubmit = !!a.autosubmit;
  if (Object.keys(ann).length) tool.annotations = ann;
  return tool;
}

async function __wm_list(conn, req) {
  const out = [];
  for (const tab of await __wm_tabs(conn)) {
    let tools = [];
    try {
      // A tab whose page does not answer (a busy main thread) is listed without tools.
      const late = new Promise((r) => setTimeout(() => r([]), __WM_TAB_MS));
      tools = await Promise.race([__wm_native(tab), late]);
    } catch {}
    for (const t of tools) {
      const f = tab.frames.get(t.frameId);
      if (!f) continue;
      out.push({
        tool_ref: __wm_ref({ t: tab.targetId, f: t.frameId, l: f.loaderId, n: t.name }),
        tool: __wm_tool(t),
        source: __wm_source(tab, t.frameId, null),
      });
    }
    // A custom tool's URL patterns match each frame's document (the top
    // one first, then nested frames, out-of-process ones included), the
    // first req.custom_frames frames of the tab (LIM_WEBMCP_CUSTOM_FRAMES):
    // a tool is listed once for every frame it matches, with that frame.
    const frames = tab.frames.has(tab.targetId) ? [...tab.frames].slice(0, req.custom_frames ?? 64) : [];
    for (const [frameId, f] of req.exclude_custom ? [] : frames) {
      for (const c of req.custom) {
        if (!__wm_match(c.url_patterns, f.url)) continue;
        out.push({
          tool_ref: c.id + '.' + __wm_ref({ t: tab.targetId, f: frameId, l: f.loaderId }),
          tool: c.tool,
          source: __wm_source(tab, frameId, { id: c.id, namespace: c.namespace }),
        });
      }
    }
    tab.s.detach().catch(() => {});
  }
  return { tools: out };
}

function __wm_output(v, cap = __WM_OUT_CAP) {
  let text;
  try {
    text = JSON.stringify(v === undefined ? null : v);
  } catch (e) {
    return { status: 'error', error_text: `the tool's output is not JSON: ${String(e?.message ?? e)}` };
  }
  if (text !== undefined && Buffer.byteLength(text) > cap)
    return { status: 'error', error_text: `the tool's output is over ${cap} bytes` };
  return { status: 'completed', output: v === undefined ? null : v };
}

function __wm_id() {
  return 'inv_' + globalThis.crypto.randomUUID().replace(/-/g, '');
}

// Fills a declarative tool's form (its fields by name) without submitting it.
function __wm_fill(input) {
  for (const [k, v] of Object.entries(input)) {
    const el = this.elements.namedItem(k);
    if (!el) continue;
    const list = el instanceof RadioNodeList ? [...el] : [el];
    for (const e of list) {
      if (e.type === 'checkbox') e.checked = Array.isArray(v) ? v.includes(e.value) : !!v;
      else if (e.type === 'radio') e.checked = e.value === String(v);
      else e.value = String(v);
      e.dispatchEvent(new Event('input', { bubbles: true }));
      e.dispatchEvent(new Event('change', { bubbles: true }));
    }
  }
}

async function __wm_invoke(conn, req, env) {
  const m = /^(ct_[A-Za-z0-9]+)\.(.*)$/.exec(String(req.ref));
  const h = __wm_unref(m ? m[2] : String(req.ref));
  if (!h || !m !== (h.n !== undefined)) return { not_found: true };
  const tabs = await __wm_tabs(conn);
  try {
    const tab = tabs.find((x) => __wm_h(x.targetId) === h.t);
    const f = tab && [...tab.frames.keys()].find((id) => __wm_h(id) === h.f);
    if (!f) return { not_found: true };
    const ref = { t: tab.targetId, f, l: tab.frames.get(f).loaderId, c: m ? m[1] : undefined, nh: h.n };
    if (__wm_h(ref.l) !== h.l) return { not_found: true };
    return await __wm_invoke_in(tab, ref, req, env);
  } finally {
    for (const t of tabs) t.s.detach().catch(() => {});
  }
}

// A CDP-backed custom tool: its source is evaluated here (the runner, in
// the session's sandbox), not in the page, with the REPL's helpers as
// globals (cdp(), js(), gotoUrl(), ...), the tool's tab their current tab;
// execute(input, {tab_id, page_url, frame}) is awaited until the deadline
// (frame: {frame_id, url} of the nested frame the tool matched, else null).
async function __wm_cdp_tool(c, ref, tab, req, env, deadline) {
  const invocation_id = __wm_id();
  const fail = (e) => ({ invocation_id, status: 'error', error_text: String(e?.message ?? e).split('\n')[0] });
  let helpers;
  try {
    helpers = await env.replHelpers();
    await helpers.useTab(ref.t);
  } catch (e) {
    return fail(e);
  }
  const r = await deadline(
    (async () => {
      const defs = new Function(`return (${c.source}\n);`)();
      const d = Array.isArray(defs) && defs.find((x) => x && __wm_def_name(x) === c.tool.name);
      if (!d || typeof d.execute !== 'function') throw new Error('the tool is no longer defined by its source');
      const f = tab.frames.get(ref.f);
      const frame = ref.f === ref.t ? null : { frame_id: ref.f, url: f.url };
      return { value: await d.execute(req.input, { tab_id: ref.t, page_url: tab.frames.get(ref.t)?.url ?? tab.url, frame }) };
    })().catch((e) => ({ error: e })),
  );
  if (r.timed_out) return { outcome_unknown: true, invocation_id };
  if (r.error !== undefined) return fail(r.error);
  return { invocation_id, ...__wm_output(r.value, __WM_CDP_OUT_CAP) };
}

// Where a page-backed custom tool runs: the page's own world of its frame's
// document. The tab's top document is its session's default; a nested
// frame's default context (the main world) is found among those
// Runtime.enable reports before it answers, on the session of the process
// the frame runs in (an out-of-process frame's own, else the tab's). null:
// the frame has no document now (it went away).
async function __wm_frame_context(tab, frameId, f) {
  const s = f.sub ?? tab.s;
  if (frameId === tab.targetId) return { s, contextId: undefined };
  const ctxs = [];
  s.on('Runtime.executionContextCreated', (ev) => ctxs.push(ev.context));
  await s.send('Runtime.enable');
  const c = ctxs.find((x) => x.auxData && x.auxData.frameId === frameId && x.auxData.isDefault);
  return c ? { s, contextId: c.id } : null;
}

// A definition's name: tool.name (the document's shape) or name.
function __wm_def_name(d) {
  return d.tool && typeof d.tool === 'object' ? d.tool.name : d.name;
}

async function __wm_invoke_in(tab, ref, req, env) {
  const gone = { not_found: true };
  const f = tab && tab.frames.get(ref.f);
  if (!f || f.loaderId !== ref.l) return gone;
  const deadline = (p) =>
    Promise.race([p, new Promise((r) => setTimeout(() => r({ timed_out: true }), req.timeout_ms))]);
  if (ref.c !== undefined) {
    const c = req.custom;
    if (!c || c.id !== ref.c || !__wm_match(c.url_patterns, f.url)) return gone;
    if (c.kind === 'cdp') return __wm_cdp_tool(c, ref, tab, req, env, deadline);
    const where = await __wm_frame_context(tab, ref.f, f);
    if (!where) return gone;
    const invocation_id = __wm_id();
    const expr = `(async () => { const defs = (${c.source}\n); const d = Array.isArray(defs) && defs.find((x) => x && (x.tool && typeof x.tool === 'object' ? x.tool.name : x.name) === ${JSON.stringify(c.tool.name)}); if (!d || typeof d.execute !== 'function') throw new Error('the tool is no longer defined by its source'); const r = await d.execute(${JSON.stringify(req.input)}); return JSON.stringify(r === undefined ? null : r) ?? 'null'; })()`;
    const r = await deadline(where.s.send('Runtime.evaluate', { expression: expr, contextId: where.contextId, awaitPromise: true, returnByValue: true }));
    if (r.timed_out) return { outcome_unknown: true, invocation_id };
    if (r.exceptionDetails)
      return { invocation_id, status: 'error', error_text: String(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text).split('\n')[0] };
    return { invocation_id, ...__wm_output(JSON.parse(r.result.value)) };
  }
  const tools = await __wm_native(tab, { titles: false });
  const t = tools.find((x) => __wm_h(x.name) === ref.nh && x.frameId === ref.f);
  if (!t) return gone;
  ref.n = t.name;
  if (t.backendNodeId !== undefined && !(t.annotations && t.annotations.autosubmit)) {
    const invocation_id = __wm_id();
    const { object } = await t.__s.send('DOM.resolveNode', { backendNodeId: t.backendNodeId });
    await t.__s.send('Runtime.callFunctionOn', {
      objectId: object.objectId,
      functionDeclaration: __wm_fill.toString(),
      arguments: [{ value: req.input }],
    });
    return { invocation_id, status: 'awaiting_submission' };
  }
  // A child frame's form: Chromium gives no node for it, so it is found in
  // the frame's document by its toolname (in our world) and filled the same way.
  if (t.form && !(t.annotations && t.annotations.autosubmit)) {
    const invocation_id = __wm_id();
    const r = await t.__s.send('Runtime.evaluate', {
      contextId: t.__ctx,
      returnByValue: true,
      expression: `(() => { const f = [...document.forms].find((x) => x.getAttribute('toolname') === ${JSON.stringify(t.name)});
        if (!f) return false; (${__wm_fill.toString()}).call(f, ${JSON.stringify(req.input)}); return true; })()`,
    });
    if (r.result?.value !== true) return gone;
    return { invocation_id, status: 'awaiting_submission' };
  }
  let answered;
  const responded = new Promise((r) => (answered = r));
  const early = new Map();
  let mine = null;
  t.__s.on('WebMCP.toolResponded', (ev) => {
    if (mine === ev.invocationId) answered(ev);
    else early.set(ev.invocationId, ev);
  });
  const { invocationId } = await t.__s.send('WebMCP.invokeTool', { frameId: ref.f, toolName: ref.n, input: req.input });
  mine = invocationId;
  if (early.has(mine)) answered(early.get(mine));
  const ev = await deadline(responded);
  if (ev.timed_out) return { outcome_unknown: true, invocation_id: invocationId };
  const status = { Completed: 'completed', Canceled: 'canceled', Error: 'error' }[ev.status] ?? 'error';
  if (status !== 'completed')
    return { invocation_id: invocationId, status, error_text: ev.errorText ?? ev.exception?.description?.split('\n')[0] ?? status };
  let out = ev.output;
  if (typeof out === 'string') {
    try {
      out = JSON.parse(out);
    } catch {}
  }
  return { invocation_id: invocationId, ...__wm_output(out) };
}

// Checks a custom tools source: a JavaScript expression giving an array of
// {kind?: "page" | "cdp", tool: {name, description, inputSchema?,
// outputSchema?, title?, annotations?}, match: {url_patterns: [...]},
// execute} (the document's shape; the tool's fields may also stand beside
// match, without tool). Evaluated here (the sandbox), and again at each
// invocation: in the page for kind "page" (the default), here for "cdp".
function __wm_define(req) {
  let defs;
  try {
    defs = new Function(`return (${req.source}\n);`)();
  } catch (e) {
    return { invalid: `does not evaluate: ${String(e?.message ?? e)}` };
  }
  if (!Array.isArray(defs) || defs.length === 0) return { invalid: 'must evaluate to a non-empty array of tool definitions' };
  const seen = new Set();
  const tools = [];
  for (const [i, d] of defs.entries()) {
    const bad = (why) => ({ invalid: `definition ${i}: ${why}` });
    if (!d || typeof d !== 'object') return bad('is not an object');
    const kind = d.kind ?? 'page';
    if (kind !== 'page' && kind !== 'cdp') return bad('kind must be "page" or "cdp"');
    if (d.tool !== undefined && (!d.tool || typeof d.tool !== 'object')) return bad('tool must be an object');
    const m = d.tool ?? d; // the tool's metadata
    if (typeof m.name !== 'string' || !/^[A-Za-z0-9_.-]{1,128}$/.test(m.name)) return bad('name must be 1..128 of [A-Za-z0-9_.-]');
    if (seen.has(m.name)) return bad(`name ${m.name} is given twice`);
    seen.add(m.name);
    if (typeof m.description !== 'string') return bad('description must be a string');
    if (typeof d.execute !== 'function') return bad('execute must be a function');
    const pats = d.match && d.match.url_patterns;
    if (!Array.isArray(pats) || pats.length === 0 || pats.some((p) => typeof p !== 'string' || !p))
      return bad('match.url_patterns must be a non-empty array of strings');
    const tool = { name: m.name, description: m.description, inputSchema: m.inputSchema ?? { type: 'object' } };
    for (const k of ['outputSchema', 'title', 'annotations']) if (m[k] !== undefined) tool[k] = m[k];
    try {
      JSON.stringify(tool);
    } catch {
      return bad('its metadata is not JSON');
    }
    tools.push({ kind, url_patterns: pats, tool });
  }
  return { tools };
}

async function __wm_main(conn, req, env = {}) {
  if (req.op === 'define') return __wm_define(req);
  if (req.op === 'list') return __wm_list(conn, req);
  return __wm_invoke(conn, req, env);
}
