// Runs every *.test.mjs file of a folder (tests/blackbox by default, or the
// folder named by TEST_DIR, e.g. tests/compat). Each exports `tests`, an array of
// {name, fn, timeout?}. Prints one line per test and ends with
// "N passed, N failed". Servers the tests start are killed by PID at exit.
import { readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { killAll } from './lib.mjs';

const here = process.env.TEST_DIR ? resolve(process.env.TEST_DIR) : dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2] ? new RegExp(process.argv[2]) : null;
let passed = 0, failed = 0;
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { killAll(); process.exit(1); });

for (const file of readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort()) {
  const { tests } = await import(pathToFileURL(join(here, file)));
  for (const t of tests) {
    const name = `${file.replace('.test.mjs', '')}: ${t.name}`;
    if (filter && !filter.test(name)) continue;
    const started = Date.now();
    try {
      await Promise.race([
        t.fn(),
        new Promise((_, rej) => setTimeout(() => rej(new Error('timed out')), t.timeout || 30000).unref()),
      ]);
      passed++;
      console.log(`ok - ${name} (${Date.now() - started} ms)`);
    } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(e && e.stack || e).split('\n').slice(0, /Sanitizer|runtime error/.test(String(e)) ? 60 : 6).join('\n  ')}`);
    }
  }
}
killAll();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
