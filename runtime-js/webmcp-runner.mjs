// WebMCP's runner (src/api/webmcp.c, docs/webmcp.md): one per call, inside the
// session's sandbox, connected to that session's DevTools only.
//   node --experimental-websocket webmcp-runner.mjs <DevTools ws URL>   (the request JSON on stdin)
// Writes one JSON line {success, result?, error?} on descriptor 3.
import { readFileSync, writeSync } from 'node:fs';

const lib = readFileSync(new URL('./webmcp.js', import.meta.url), 'utf8');
const { __wm_main, __wm_connect } = new Function(`${lib}\nreturn { __wm_main, __wm_connect };`)();
// The REPL's helpers (runtime-js/repl.mjs, loaded without its evaluator),
// for a CDP-backed custom tool: they become globals, on this session's
// DevTools, like the REPL's own.
async function replHelpers() {
  process.env.CDP_ENDPOINT = process.argv[2];
  globalThis.__browserdReplHelpersOnly = true;
  return (await import('./repl.mjs')).forRunner;
}

// A CDP-backed tool's stray rejected promise must not kill the runner
// before it answers (node's default for an unhandled rejection).
process.on('unhandledRejection', () => {});

let out;
try {
  const req = JSON.parse(readFileSync(0, 'utf8'));
  const conn = req.op === 'define' ? null : await __wm_connect(process.argv[2]);
  out = { success: true, result: await __wm_main(conn, req, { replHelpers }) };
} catch (e) {
  out = { success: false, error: String(e?.message ?? e) };
}
writeSync(3, JSON.stringify(out) + '\n');
process.exit(0);
