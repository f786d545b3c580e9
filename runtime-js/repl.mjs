// The Browser REPL's process (src/runtime/repl.h, docs/repl.md): one per
// session, inside the session's sandbox, connected to that session's
// DevTools only (process.env.CDP_ENDPOINT).
//   node --experimental-websocket repl.mjs
// Reads frames {code} on stdin; writes frames on descriptor 3: text output
// {t:"text", channel, text}, images {t:"image", mime_type, data_b64} and one
// {t:"done", success, error?, stack?} per execution. A frame is a 4-byte
// big-endian length and one JSON object. The code runs in node's REPL
// evaluator (the `repl` module): top-level declarations persist between
// executions, top-level await works, dynamic import() resolves from here.
import nodeRepl from 'node:repl';
import { PassThrough } from 'node:stream';
import { readFileSync, writeFileSync, writeSync } from 'node:fs';
import http from 'node:http';
import tls from 'node:tls';
import { createRequire, register } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import util from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const TEXT_CAP = 256 * 1024; // LIM_REPL_TEXT_BYTES: the server cuts and flags past it
const home = process.env.HOME || '/home/kernel';

// ---- frames on descriptor 3 ----

let current = null; // the execution in progress: {textBytes}
const realStderr = process.stderr.write.bind(process.stderr);

function sendFrame(obj) {
  // Lone surrogates would make JSON the server refuses: replaced (U+FFFD).
  const body = Buffer.from(JSON.stringify(obj, (k, v) => (typeof v === 'string' ? v.toWellFormed() : v)), 'utf8');
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length, 0);
  const all = Buffer.concat([head, body]);
  let off = 0;
  while (off < all.length) off += writeSync(3, all, off, all.length - off);
}

// Output outside an execution (a timer firing later) is dropped: nobody
// waits for it, and it must not fill the channel.
function emitText(channel, text) {
  if (!current) return;
  if (current.textBytes > TEXT_CAP) return;
  text = String(text);
  current.textBytes += Buffer.byteLength(text);
  sendFrame({ t: 'text', channel, text });
}

function mimeOf(b) {
  if (b[0] === 0x89 && b[1] === 0x50) return 'image/png';
  if (b[0] === 0xff && b[1] === 0xd8) return 'image/jpeg';
  if (b.slice(0, 4).toString() === 'RIFF' && b.slice(8, 12).toString() === 'WEBP') return 'image/webp';
  if (b.slice(0, 3).toString() === 'GIF') return 'image/gif';
  return null;
}

function emitImage(src) {
  let bytes;
  if (src && typeof src === 'object' && typeof src.path === 'string') bytes = readFileSync(src.path);
  else if (Buffer.isBuffer(src) || src instanceof Uint8Array) bytes = Buffer.from(src);
  else throw new TypeError('repl.emitImage: give {path} or a Buffer');
  const mime = mimeOf(bytes);
  if (!mime) throw new TypeError('repl.emitImage: not a PNG, JPEG, WebP or GIF image');
  if (!current) return;
  sendFrame({ t: 'image', mime_type: mime, data_b64: bytes.toString('base64') });
}

// ---- the console and the standard streams go to the channel ----

const fmt = (args) => util.formatWithOptions({ colors: false, depth: 4 }, ...args) + '\n';
for (const m of ['log', 'info', 'debug', 'trace', 'dir', 'table'])
  console[m] = (...a) => emitText('stdout', fmt(a));
for (const m of ['error', 'warn']) console[m] = (...a) => emitText('stderr', fmt(a));
process.stdout.write = (chunk, ...rest) => {
  emitText('stdout', typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString());
  const cb = rest.find((x) => typeof x === 'function');
  if (cb) cb();
  return true;
};
process.stderr.write = (chunk, ...rest) => {
  emitText('stderr', typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString());
  const cb = rest.find((x) => typeof x === 'function');
  if (cb) cb();
  return true;
};

// ---- the session's DevTools ----

const endpoint = process.env.CDP_ENDPOINT;
let ws = null;
let nextId = 1;
const waiting = new Map();
const events = []; // {method, params, sessionId}, the newest 1000
const eventWaiters = [];
const tab = { targetId: null, sessionId: null };

function connect() {
  if (ws && ws.readyState === 1) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const s = new WebSocket(endpoint);
    s.onopen = () => {
      ws = s;
      resolve();
    };
    s.onerror = () => reject(new Error('cannot reach the browser DevTools'));
    s.onclose = () => {
      if (ws === s) ws = null;
      for (const [, w] of waiting) w.reject(new Error('the DevTools connection closed'));
      waiting.clear();
      tab.sessionId = null;
    };
    s.onmessage = (ev) => {
      const m = JSON.parse(typeof ev.data === 'string' ? ev.data : Buffer.from(ev.data).toString());
      if (m.id && waiting.has(m.id)) {
        const w = waiting.get(m.id);
        waiting.delete(m.id);
        if (m.error) w.reject(new Error(`${w.method}: ${m.error.message}`));
        else w.resolve(m.result);
        return;
      }
      if (!m.method) return;
      const e = { method: m.method, params: m.params, sessionId: m.sessionId ?? null };
      if (m.method === 'Target.detachedFromTarget' && m.params.sessionId === tab.sessionId)
        tab.sessionId = null;
      for (let i = 0; i < eventWaiters.length; i++) {
        const w = eventWaiters[i];
        if (w.method === e.method && (!w.filter || w.filter(e.params))) {
          eventWaiters.splice(i, 1);
          w.resolve(e);
          return;
        }
      }
      events.push(e);
      if (events.length > 1000) events.shift();
    };
  });
}

async function rawSend(method, params, sessionId) {
  await connect();
  const id = nextId++;
  const msg = { id, method, params: params ?? {} };
  if (sessionId) msg.sessionId = sessionId;
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject, method });
    ws.send(JSON.stringify(msg));
  });
}

async function attach(targetId) {
  const { sessionId } = await rawSend('Target.attachToTarget', { targetId, flatten: true });
  tab.targetId = targetId;
  tab.sessionId = sessionId;
  await rawSend('Page.enable', {}, sessionId).catch(() => {});
  return sessionId;
}

async function pages() {
  const { targetInfos } = await rawSend('Target.getTargets');
  return targetInfos.filter((t) => t.type === 'page');
}

async function pageSession() {
  if (tab.sessionId) return tab.sessionId;
  const all = await pages();
  const t = all.find((p) => p.targetId === tab.targetId) ?? all[0];
  if (t) return attach(t.targetId);
  const { targetId } = await rawSend('Target.createTarget', { url: 'about:blank' });
  return attach(targetId);
}

// cdp(method, params, sessionId): without sessionId, the current tab; null:
// the browser itself; a string: that CDP session.
async function cdp(method, params = {}, ...rest) {
  const sid = rest.length === 0 || rest[0] === undefined ? await pageSession() : rest[0];
  return rawSend(method, params, sid ?? undefined);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function js(expression) {
  const r = await cdp('Runtime.evaluate', { expression: String(expression), returnByValue: true, awaitPromise: true });
  if (r.exceptionDetails)
    throw new Error(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text);
  return r.result.value;
}

async function waitFor(pred, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await pred();
      if (v) return v;
    } catch {
      // the page is between documents: try again
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

const waitForLoad = (timeoutMs = 30000) =>
  waitFor(async () => (await js('document.readyState')) === 'complete', timeoutMs, 'the page load');

async function gotoUrl(url, { timeoutMs = 30000 } = {}) {
  const r = await cdp('Page.navigate', { url: String(url) });
  if (r.errorText) throw new Error(`navigation to ${url} failed: ${r.errorText}`);
  await waitForLoad(timeoutMs);
  return pageInfo();
}

const pageInfo = () =>
  js('({url: location.href, title: document.title, readyState: document.readyState, width: innerWidth, height: innerHeight})');

async function captureScreenshot(path, { format = 'png', quality, fullPage = false } = {}) {
  const r = await cdp('Page.captureScreenshot', { format, quality, captureBeyondViewport: fullPage });
  const buf = Buffer.from(r.data, 'base64');
  if (path) writeFileSync(path, buf);
  return buf;
}

async function center(target) {
  if (target && typeof target === 'object') return { x: target.x, y: target.y };
  const p = await js(`(() => { const e = document.querySelector(${JSON.stringify(String(target))});
    if (!e) return null; e.scrollIntoView({block: 'center', inline: 'center'});
    const r = e.getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()`);
  if (!p) throw new Error(`no element matches ${target}`);
  return p;
}

async function click(target, { button = 'left', clickCount = 1 } = {}) {
  const { x, y } = await center(target);
  await cdp('Input.dispatchMouseEvent', { type: 'mouseMoved', x, y });
  await cdp('Input.dispatchMouseEvent', { type: 'mousePressed', x, y, button, clickCount });
  await cdp('Input.dispatchMouseEvent', { type: 'mouseReleased', x, y, button, clickCount });
  return { x, y };
}

const typeText = (text) => cdp('Input.insertText', { text: String(text) });

async function fillInput(selector, text) {
  const ok = await js(`(() => { const e = document.querySelector(${JSON.stringify(String(selector))});
    if (!e) return false; e.focus(); if (e.select) e.select(); return true; })()`);
  if (!ok) throw new Error(`no element matches ${selector}`);
  await typeText(text);
}

const KEYS = {
  Enter: [13, '\r'], Tab: [9, '\t'], Escape: [27], Backspace: [8], Delete: [46], ArrowUp: [38],
  ArrowDown: [40], ArrowLeft: [37], ArrowRight: [39], Home: [36], End: [35], PageUp: [33],
  PageDown: [34], Space: [32, ' '],
};

async function pressKey(key) {
  const k = KEYS[key];
  const code = k ? k[0] : String(key).toUpperCase().charCodeAt(0);
  const text = k ? k[1] : String(key).length === 1 ? String(key) : undefined;
  const base = { key: key === 'Space' ? ' ' : key, code: key, windowsVirtualKeyCode: code };
  await cdp('Input.dispatchKeyEvent', { type: text ? 'keyDown' : 'rawKeyDown', text, ...base });
  await cdp('Input.dispatchKeyEvent', { type: 'keyUp', ...base });
}

async function scroll(deltaX = 0, deltaY = 0, at) {
  const p = at ?? (await js('({x: innerWidth / 2, y: innerHeight / 2})'));
  await cdp('Input.dispatchMouseEvent', { type: 'mouseWheel', x: p.x, y: p.y, deltaX, deltaY });
}

const waitMs = (ms) => sleep(ms);

const waitForElement = (selector, { timeoutMs = 10000 } = {}) =>
  waitFor(() => js(`!!document.querySelector(${JSON.stringify(String(selector))})`), timeoutMs,
    `element ${selector}`);

function drainEvents(method) {
  const out = [];
  for (let i = events.length - 1; i >= 0; i--)
    if (!method || events[i].method === method) out.unshift(...events.splice(i, 1));
  return out;
}

function waitForEvent(method, { timeoutMs = 10000, filter } = {}) {
  const i = events.findIndex((e) => e.method === method && (!filter || filter(e.params)));
  if (i >= 0) return Promise.resolve(events.splice(i, 1)[0]);
  return new Promise((resolve, reject) => {
    const w = { method, filter, resolve };
    eventWaiters.push(w);
    setTimeout(() => {
      const k = eventWaiters.indexOf(w);
      if (k >= 0) {
        eventWaiters.splice(k, 1);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${method}`));
      }
    }, timeoutMs);
  });
}

async function listTabs() {
  await pageSession();
  return (await pages()).map((t) => ({ id: t.targetId, url: t.url, title: t.title, current: t.targetId === tab.targetId }));
}

async function currentTab() {
  return (await listTabs()).find((t) => t.current) ?? null;
}

async function switchTab(id) {
  if (!(await pages()).some((t) => t.targetId === id)) throw new Error(`no tab ${id}`);
  if (tab.sessionId) await rawSend('Target.detachFromTarget', { sessionId: tab.sessionId }).catch(() => {});
  await attach(id);
  await rawSend('Target.activateTarget', { targetId: id }).catch(() => {});
  return currentTab();
}

async function newTab(url = 'about:blank') {
  const { targetId } = await rawSend('Target.createTarget', { url: String(url) });
  return switchTab(targetId);
}

// closeTab(id?): returns once the tab is gone from the browser's targets
// (closeTarget answers before it is), at most 5 s later.
async function closeTab(id = tab.targetId) {
  await rawSend('Target.closeTarget', { targetId: id });
  if (id === tab.targetId) {
    tab.targetId = null;
    tab.sessionId = null;
  }
  const end = Date.now() + 5000;
  while (Date.now() < end && (await pages()).some((p) => p.targetId === id)) await sleep(50);
}

async function accessibilitySnapshot() {
  const { nodes } = await cdp('Accessibility.getFullAXTree');
  return nodes
    .filter((n) => !n.ignored)
    .map((n) => ({ role: n.role?.value ?? '', name: n.name?.value ?? '', backendNodeId: n.backendDOMNodeId }));
}

// uploadFile(selector, paths): files the browser sees (the session's /tmp
// and /home) set on a file input.
async function uploadFile(selector, paths) {
  const { root } = await cdp('DOM.getDocument', { depth: 0 });
  const { nodeId } = await cdp('DOM.querySelector', { nodeId: root.nodeId, selector: String(selector) });
  if (!nodeId) throw new Error(`no element matches ${selector}`);
  await cdp('DOM.setFileInputFiles', { nodeId, files: [].concat(paths).map(String) });
}

// waitForNetworkIdle: no new resource entry in the page for idleMs.
async function waitForNetworkIdle({ idleMs = 500, timeoutMs = 30000 } = {}) {
  const end = Date.now() + timeoutMs;
  let last = -1;
  let since = Date.now();
  for (;;) {
    const n = await js("performance.getEntriesByType('resource').length").catch(() => -1);
    if (n !== last) {
      last = n;
      since = Date.now();
    } else if (Date.now() - since >= idleMs) return;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for the network to idle`);
    await sleep(100);
  }
}

// ensureRealTab(): makes the current tab a page of the user's (not chrome://,
// devtools://, an extension's or about:) when there is one, opening a blank
// tab when there is no page at all; returns currentTab().
const internalUrl = (u) => /^(chrome|chrome-untrusted|chrome-extension|devtools|about):/.test(u ?? '');
async function ensureRealTab() {
  // A tab closing meanwhile (listed, then gone when attached to): again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await ensureRealTabOnce();
    } catch (e) {
      if (attempt >= 5 || !/No target with given id/.test(e.message)) throw e;
      await sleep(100);
    }
  }
}
async function ensureRealTabOnce() {
  const all = await pages();
  if (all.length === 0) return newTab('about:blank');
  const cur = all.find((p) => p.targetId === tab.targetId && tab.sessionId);
  if (cur && !internalUrl(cur.url)) return currentTab();
  const real = all.find((p) => !internalUrl(p.url));
  if (real) return switchTab(real.targetId);
  if (!cur) await switchTab(all[0].targetId);
  return currentTab();
}

// httpGet(url, {headers, timeoutMs}?): a plain GET (no browser: no cookies,
// no page) through the session's egress proxy (HTTP_PROXY, set by the
// server), so the session's network rules apply as to its browser.
// Redirects are followed (up to 5). Returns {status, url, headers, body}
// (body as UTF-8 text, at most 10 MiB); throws when the egress refuses the
// destination or it cannot be reached.
const HTTPGET_BODY_MAX = 10 * 1024 * 1024;
function refused(res, body, url) {
  const why = body.toString('utf8').trim().slice(0, 300);
  return new Error(`httpGet ${url}: the session's egress refused it (${res.statusCode}${why ? `: ${why}` : ''})`);
}
function readBody(res, url) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let n = 0;
    res.on('data', (c) => {
      n += c.length;
      if (n > HTTPGET_BODY_MAX) {
        res.destroy();
        reject(new Error(`httpGet ${url}: the body exceeds ${HTTPGET_BODY_MAX} bytes`));
      } else parts.push(c);
    });
    res.on('end', () => resolve(Buffer.concat(parts)));
    res.on('error', reject);
  });
}
function getOnce(u, headers, timeoutMs) {
  const proxy = process.env.HTTP_PROXY;
  if (!proxy) return Promise.reject(new Error('httpGet: this session has no egress proxy'));
  const p = new URL(proxy);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`httpGet ${u.href}: timed out after ${timeoutMs} ms`)), timeoutMs);
    let req = null;
    let done = false;
    const fail = (e) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req?.destroy();
      reject(e);
    };
    const answer = async (res) => {
      try {
        const body = await readBody(res, u.href);
        if (res.headers['x-browserd-egress'] === 'refused') return fail(refused(res, body, u.href));
        done = true;
        clearTimeout(timer);
        resolve({ status: res.statusCode, headers: res.headers, body });
      } catch (e) {
        fail(e);
      }
    };
    const hdrs = { 'user-agent': 'browserd-repl', ...headers, host: u.host };
    if (u.protocol === 'http:') {
      req = http.request({ host: p.hostname, port: p.port, method: 'GET', path: u.href, headers: hdrs, agent: false }, answer);
      req.on('error', (e) => fail(new Error(`httpGet ${u.href}: ${e.message}`)));
      req.end();
      return;
    }
    const port = u.port || 443;
    const connect = http.request({ host: p.hostname, port: p.port, method: 'CONNECT', path: `${u.hostname}:${port}`, headers: { host: `${u.hostname}:${port}` }, agent: false });
    req = connect;
    connect.on('error', (e) => fail(new Error(`httpGet ${u.href}: ${e.message}`)));
    connect.on('connect', (res, socket, head) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        return fail(refused(res, head ?? Buffer.alloc(0), u.href));
      }
      const tlsSock = tls.connect({ socket, servername: u.hostname.replace(/^\[|\]$/g, ''), ALPNProtocols: ['http/1.1'] });
      req = http.request({ method: 'GET', path: `${u.pathname}${u.search}`, headers: hdrs, createConnection: () => tlsSock, agent: false }, answer);
      req.on('error', (e) => fail(new Error(`httpGet ${u.href}: ${e.message}`)));
      req.end();
    });
    connect.end();
  });
}
async function httpGet(url, { headers = {}, timeoutMs = 30000 } = {}) {
  let u = new URL(String(url));
  for (let hop = 0; ; hop++) {
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`httpGet: not an http(s) URL: ${u.href}`);
    const r = await getOnce(u, headers, timeoutMs);
    if (r.status >= 300 && r.status < 400 && r.headers.location && hop < 5) {
      u = new URL(r.headers.location, u);
      continue;
    }
    return { status: r.status, url: u.href, headers: r.headers, body: r.body.toString('utf8') };
  }
}

// iframeTarget(urlPart): the CDP session of an out-of-process frame whose
// URL contains urlPart (for cdp's third argument).
async function iframeTarget(urlPart) {
  const { targetInfos } = await rawSend('Target.getTargets');
  const t = targetInfos.find((x) => x.type === 'iframe' && x.url.includes(String(urlPart)));
  if (!t) throw new Error(`no out-of-process frame with ${urlPart} in its URL`);
  const { sessionId } = await rawSend('Target.attachToTarget', { targetId: t.targetId, flatten: true });
  return sessionId;
}

// webmcp.listTools/invokeTool: the same script as the server's WebMCP
// endpoints (runtime-js/webmcp.js, docs/webmcp.md), over a DevTools
// connection of its own per call. Custom tools live in the server, not here:
// listTools shows the pages' own tools.
let wmLib = null;
async function wmRun(req) {
  if (!wmLib) wmLib = new Function(`${readFileSync(`${HERE}/webmcp.js`, 'utf8')}\nreturn { __wm_main, __wm_connect };`)();
  const conn = await wmLib.__wm_connect(process.env.CDP_ENDPOINT);
  try {
    return await wmLib.__wm_main(conn, req);
  } finally {
    conn.close();
  }
}
const webmcp = Object.freeze({
  async listTools() {
    return (await wmRun({ op: 'list', custom: [], exclude_custom: true })).tools;
  },
  async invokeTool(toolRef, input = {}, { timeoutSec = 30 } = {}) {
    const r = await wmRun({ op: 'invoke', ref: String(toolRef), input, timeout_ms: timeoutSec * 1000 });
    if (r.not_found) throw new Error('no such tool_ref (tools die with their document: list them again)');
    if (r.outcome_unknown) throw new Error(`outcome_unknown: no answer within ${timeoutSec} s (invocation ${r.invocation_id})`);
    return r;
  },
});

const helpers = {
  webmcp, cdp, drainEvents, waitForEvent, gotoUrl, pageInfo, accessibilitySnapshot, click, typeText,
  fillInput, pressKey, scroll, captureScreenshot, listTabs, currentTab, switchTab, newTab, closeTab,
  waitMs, waitForLoad, waitForElement, waitForNetworkIdle, js, uploadFile, iframeTarget,
  ensureRealTab, httpGet,
};
const HELP = {
  cdp: 'cdp(method, params?, sessionId?) -> result: a DevTools call on the current tab (sessionId null: the browser)',
  drainEvents: 'drainEvents(method?) -> [{method, params, sessionId}]: the events received so far, removed',
  waitForEvent: 'waitForEvent(method, {timeoutMs, filter}?) -> event',
  gotoUrl: 'gotoUrl(url, {timeoutMs}?) -> pageInfo(): navigates the current tab and waits for the load',
  pageInfo: 'pageInfo() -> {url, title, readyState, width, height}',
  accessibilitySnapshot: 'accessibilitySnapshot() -> [{role, name, backendNodeId}]',
  click: 'click(selector | {x, y}, {button, clickCount}?)',
  typeText: 'typeText(text): inserts text at the focus',
  fillInput: 'fillInput(selector, text): focuses, selects and types',
  pressKey: 'pressKey(key): Enter, Tab, Escape, Backspace, Arrow*, or one character',
  scroll: 'scroll(deltaX, deltaY, {x, y}?)',
  captureScreenshot: 'captureScreenshot(path?, {format, quality, fullPage}?) -> Buffer (written to path when given)',
  listTabs: 'listTabs() -> [{id, url, title, current}]',
  currentTab: 'currentTab() -> {id, url, title, current}',
  switchTab: 'switchTab(id)',
  newTab: 'newTab(url?): opens and switches to it',
  closeTab: 'closeTab(id?)',
  waitMs: 'waitMs(ms)',
  waitForLoad: 'waitForLoad(timeoutMs?)',
  waitForElement: 'waitForElement(selector, {timeoutMs}?)',
  waitForNetworkIdle: 'waitForNetworkIdle({idleMs, timeoutMs}?): no new resource loaded for idleMs',
  js: 'js(expression) -> value: evaluated in the page, promises awaited',
  uploadFile: 'uploadFile(selector, paths): sets files the browser sees (/tmp, /home) on a file input',
  iframeTarget: 'iframeTarget(urlPart) -> sessionId of an out-of-process frame, for cdp()',
  ensureRealTab: 'ensureRealTab() -> currentTab(): switches to a page of the user\'s (not chrome://, devtools://, about:) when there is one; opens a blank tab when there is no page',
  httpGet: 'httpGet(url, {headers, timeoutMs}?) -> {status, url, headers, body}: a plain GET (no browser cookies) through the session\'s egress proxy, its rules applied; redirects followed; body as text (at most 10 MiB); throws when the egress refuses it',
  'webmcp.listTools': 'webmcp.listTools() -> [{tool_ref, tool, source}]: the tools the pages registered (as GET webmcp/tools?exclude_custom=true)',
  'webmcp.invokeTool': 'webmcp.invokeTool(tool_ref, input?, {timeoutSec}?) -> {invocation_id, status, output?, error_text?}',
  'repl.write': 'repl.write(...values): output on the "write" channel',
  'repl.emitImage': 'repl.emitImage({path} | Buffer): an image in the answer',
};

const replApi = {
  write: (...a) => emitText('write', a.map((v) => (typeof v === 'string' ? v : util.inspect(v))).join(' ')),
  emitImage,
  help(name) {
    const keys = name ? [String(name)] : Object.keys(HELP);
    const text = keys.map((k) => (HELP[k] ? `${k}: ${HELP[k]}` : `${k}: no such helper`)).join('\n') + '\n';
    emitText('write', text);
  },
};

Object.assign(globalThis, helpers);
globalThis.browser = Object.freeze({ ...helpers });
globalThis.repl = Object.freeze(replApi);
globalThis.require = createRequire(`${HERE}/repl.mjs`);

// A CDP-backed WebMCP custom tool's runner (runtime-js/webmcp-runner.mjs)
// imports this module for its helpers alone (the globals above, on
// CDP_ENDPOINT): it sets globalThis.__browserdReplHelpersOnly first, and
// the evaluator and the frames on stdin below are not started. useTab(id)
// makes a tab the helpers' current one (without bringing it to the front).
export const forRunner = { useTab: attach };
if (!globalThis.__browserdReplHelpersOnly) startRepl();

function startRepl() {
  // ---- the evaluator: node's REPL, fed code directly ----

  const server = nodeRepl.start({
    input: new PassThrough(),
    output: new PassThrough().resume(),
    terminal: false,
    useGlobal: true,
    prompt: '',
    ignoreUndefined: true,
    preview: false,
  });
  // The REPL's domain reports thrown errors (its own printing is replaced):
  // the execution in progress fails with it; errors after it are dropped.
  let settle = null;
  server._domain.removeAllListeners('error');
  server._domain.on('error', (e) => {
    if (settle) settle(e);
  });
  process.on('unhandledRejection', (e) => emitText('stderr', `Unhandled rejection: ${e?.stack ?? e}\n`));

  // import() resolves against the working folder (home); bare names it does
  // not find come from runtime-js (playwright-core).
  register('./repl-hooks.mjs', import.meta.url);
  function evaluate(code) {
    return new Promise((resolve) => {
      let once = false;
      settle = (err) => {
        if (once) return;
        once = true;
        settle = null;
        resolve(err);
      };
      server.eval(code, server.context, 'repl', (err) => settle && settle(err));
    });
  }

  async function execute(code) {
    current = { textBytes: 0 };
    const err = await evaluate(code);
    const done = { t: 'done', success: !err };
    if (err) {
      const e = err.err ?? err; // a Recoverable wraps the SyntaxError of unfinished code
      done.error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      if (e?.stack) done.stack = String(e.stack);
    }
    current = null;
    sendFrame(done);
  }

  // ---- frames on stdin ----

  // Chunks are kept in a list and joined once a frame is whole: an 8 MiB
  // frame arrives in many pipe-sized chunks, and joining at each would copy it
  // over and over.
  let pending = Buffer.alloc(0);
  const parts = [];
  let partBytes = 0;
  let need = -1; // the bytes of the frame being read, once its length is known
  let chain = Promise.resolve();
  const join = () => {
    pending = Buffer.concat([pending, ...parts]);
    parts.length = 0;
    partBytes = 0;
  };
  process.stdin.on('data', (chunk) => {
    parts.push(chunk);
    partBytes += chunk.length;
    if (need < 0 && pending.length + partBytes >= 4) {
      join();
      need = 4 + pending.readUInt32BE(0);
    }
    if (need < 0 || pending.length + partBytes < need) return;
    join();
    while (pending.length >= 4) {
      const n = pending.readUInt32BE(0);
      if (pending.length < 4 + n) break;
      const msg = JSON.parse(pending.subarray(4, 4 + n).toString('utf8'));
      pending = pending.subarray(4 + n);
      chain = chain.then(() => execute(String(msg.code ?? '')));
    }
    need = pending.length >= 4 ? 4 + pending.readUInt32BE(0) : -1;
  });
  process.stdin.on('end', () => process.exit(0));
  try {
    process.chdir(home);
  } catch {
    // no home folder: work where the sandbox started us
  }
}
