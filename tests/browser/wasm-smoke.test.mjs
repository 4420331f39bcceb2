// The emcc build of tests/wasm/smoke.c, loaded in a real Chromium page,
// prints the same transcript as the native build: libsodium's randomness,
// Ed25519 and msgpack-c all work in a browser, not only under node.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run } from '../lib/proc.mjs';
import { launch, serve } from './chromium.mjs';

const page = `<!doctype html><meta charset="utf-8"><title>smoke</title>
<script>
  window.lines = [];
  window.exitCode = null;
  var Module = {
    print: (s) => window.lines.push(s),
    printErr: (s) => console.error(s),
    onExit: (code) => { window.exitCode = code; },
  };
</script>
<script src="/wasm/smoke.js"></script>`;

let browser, server;
before(async () => {
  server = await serve({ '/wasm/': path.join(build, 'wasm') }, { '/': page });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.close();
});

test('smoke transcript in Chromium equals the native one', async () => {
  const native = await run(path.join(build, 'tests/wasm/smoke'));
  assert.equal(native.code, 0);

  const tab = await browser.newPage();
  const errors = [];
  tab.on('pageerror', (e) => errors.push(e.message));
  await tab.goto(server.url + '/');
  await tab.waitForFunction(() => window.exitCode !== null, null, { timeout: 20000 });
  const { lines, exitCode } = await tab.evaluate(() => ({ lines: window.lines, exitCode: window.exitCode }));
  assert.deepEqual(errors, []);
  assert.equal(exitCode, 0);
  assert.equal(lines.join('\n') + '\n', native.stdout);
});
