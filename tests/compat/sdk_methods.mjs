// Every method of the installed official SDK (@onkernel/sdk), with the HTTP
// method and path it calls, derived from the SDK itself rather than typed by
// hand: a client is built (no request is sent), its resource tree is walked,
// and each method's own source is read for its `this._client.<verb>(path)`
// call. Methods that delegate to a sibling method inherit its route.
//
//   node tests/compat/sdk_methods.mjs          prints the list as JSON
//
// Exports SDK_VERSION and sdkMethods(): [{name, http, path, params, note?}],
// where name is the call path on the client ("browsers.fs.watch.stop"), http is
// GET/POST/PUT/PATCH/DELETE, path uses {param} for path parameters, and params
// lists the method's declared parameter names.
import { fileURLToPath } from 'node:url';
import Kernel from '@onkernel/sdk';
import { VERSION } from '@onkernel/sdk/version';

export const SDK_VERSION = VERSION;

const CALL = /this\._client\.(get|post|put|patch|delete|getAPIList)\(\s*(?:path\s*`([^`]*)`|'([^']*)')/;
const VERBS = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', delete: 'DELETE', getAPIList: 'GET' };

// Methods that do not go through the client's request helpers at all.
const SPECIAL = {
  'browsers.fetch': {
    http: '*', path: '{base_url}/curl/raw',
    note: "sent to the session's own base_url (from the Browser record), not to the API",
  },
};

function paramNames(fn) {
  const src = fn.toString();
  const m = /^[^(]*\(([^)]*)\)/.exec(src);
  if (!m) return [];
  return m[1].split(',').map((p) => p.replace(/=.*$/s, '').trim()).filter(Boolean);
}

function routeOf(proto, method, seen = new Set()) {
  const src = proto[method].toString();
  const c = CALL.exec(src);
  if (c) {
    const path = (c[2] ?? c[3]).replace(/\$\{(\w+)\}/g, '{$1}');
    return { http: VERBS[c[1]], path, list: c[1] === 'getAPIList' };
  }
  // Delegation to a sibling method: this.exportChunk(...)
  for (const d of src.matchAll(/this\.(\w+)\(/g)) {
    if (d[1] !== method && !seen.has(d[1]) && typeof proto[d[1]] === 'function') {
      seen.add(method);
      const r = routeOf(proto, d[1], seen);
      if (r) return { ...r, note: `delegates to ${d[1]}` };
    }
  }
  return null;
}

let cache;
export function sdkMethods() {
  if (cache) return cache;
  const client = new Kernel({ apiKey: 'unused', baseURL: 'http://127.0.0.1:9' });
  const out = [];
  const walk = (obj, prefix) => {
    for (const key of Object.keys(obj)) {
      const res = obj[key];
      if (!res || typeof res !== 'object' || res._client !== client) continue;
      const proto = Object.getPrototypeOf(res);
      for (const m of Object.getOwnPropertyNames(proto)) {
        if (m === 'constructor' || typeof proto[m] !== 'function') continue;
        const name = `${prefix}${key}.${m}`;
        const r = SPECIAL[name] || routeOf(proto, m);
        if (!r) throw new Error(`sdk_methods: cannot find the HTTP call of ${name}; add it to SPECIAL`);
        out.push({ name, ...r, params: paramNames(proto[m]) });
      }
      walk(res, `${prefix}${key}.`);
    }
  };
  walk(client, '');
  cache = out;
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(JSON.stringify({ sdk: SDK_VERSION, methods: sdkMethods() }, null, 1));
}
