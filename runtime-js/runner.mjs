// playwright.execute's runner (src/runtime/pwexec.h): runs inside the
// session's sandbox, connected to that session's DevTools only.
//   node runner.mjs <DevTools ws URL>   (the code on stdin)
// Writes one JSON line {success, result?, error?} on descriptor 3; what the
// code prints stays on stdout/stderr (a failure's stack goes to stderr).
import { readFileSync, writeSync } from 'node:fs';
import { transformSync } from 'esbuild';
import { chromium } from 'playwright-core';

const wsUrl = process.argv[2];

function finish(outcome) {
  let line;
  try {
    line = JSON.stringify(outcome);
  } catch (e) {
    line = JSON.stringify({ success: false, error: `result is not serializable: ${e.message}` });
  }
  writeSync(3, line + '\n');
  process.exit(0);
}

const code = readFileSync(0, 'utf8');
let js;
try {
  // The body of an async function with page, context and browser in scope
  // (TypeScript or JavaScript; types are stripped).
  js = transformSync(`async function __browserd_user(page, context, browser) {\n${code}\n}`, {
    loader: 'ts',
    target: 'es2022',
  }).code;
} catch (e) {
  finish({ success: false, error: `TypeScript transform error: ${e.message}` });
}

let fn;
try {
  fn = new Function(`${js}\nreturn __browserd_user;`)();
} catch (e) {
  process.stderr.write(`${e.stack ?? e}\n`);
  finish({ success: false, error: String(e.message ?? e) });
}

let browser;
try {
  browser = await chromium.connectOverCDP(wsUrl);
} catch (e) {
  process.stderr.write(`${e.stack ?? e}\n`);
  finish({ success: false, error: `execution failed: ${e.message}` });
}
const context = browser.contexts()[0] ?? (await browser.newContext());
const page = context.pages()[0] ?? (await context.newPage());
try {
  const result = await fn(page, context, browser);
  finish({ success: true, result: result === undefined ? null : result });
} catch (e) {
  process.stderr.write(`${e?.stack ?? e}\n`);
  finish({ success: false, error: String(e?.message ?? e) });
}
