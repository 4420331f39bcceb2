// `make install`: the binary and the web files under DESTDIR/PREFIX, and an
// installed coordinator, run where there is no ./web, serving the dashboard,
// the contribute page and the browser node from PREFIX/share/simfarm/web;
// `make uninstall` takes them away again. scripts/install-deps.sh --runtime
// names the package of every library the binary links.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, run, top } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';
import { serve } from '../lib/coord.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-install-'));
const dest = path.join(tmp, 'dest');
const prefix = '/opt/simfarm';

// make as a user would run it, not as a child of the make running the tests
function make(args) {
  const env = { ...process.env };
  for (const k of ['MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES']) delete env[k];
  return run('make', ['--no-print-directory', `BUILD=${path.relative(top, build)}`, ...args],
    { env, cwd: top, timeoutMs: 300000 });
}

let pg;
before(async () => { pg = await startPostgres(); });
after(async () => {
  await pg?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('an installed coordinator serves the dashboard, the contribute page and the browser node', async () => {
  const inst = await make(['install', `DESTDIR=${dest}`, `PREFIX=${prefix}`]);
  assert.equal(inst.code, 0, inst.stdout + inst.stderr);
  const root = path.join(dest, prefix);
  const bin = path.join(root, 'bin/simfarm');
  assert.equal(fs.statSync(bin).mode & 0o777, 0o755);
  const v = await run(bin, ['--version']);
  assert.equal(v.code, 0, v.stderr);
  assert.match(v.stdout, /^simfarm \d+\.\d+\.\d+/);

  const cwd = path.join(tmp, 'elsewhere'); // no ./web here
  fs.mkdirSync(cwd);
  const srv = await serve(pg.url, { bin, cwd });
  try {
    const web = fs.realpathSync(path.join(root, 'share/simfarm/web'));
    assert.match(srv.stdout(), new RegExp(`serving the web files in ${web} at /`));
    for (const [p, type, has] of [
      ['/', 'text/html', '<title>simfarm</title>'],
      ['/contribute', 'text/html', 'contribute.js'],
      ['/contribute.js', 'text/javascript', 'node/node-worker.js'],
      ['/js/app.js', 'text/javascript', 'import'],
      ['/node/simfarm-node.js', 'text/javascript', 'SimfarmNode'],
      ['/node/simfarm-node.wasm', 'application/wasm', null],
      ['/node_modules/uplot/dist/uPlot.esm.js', 'text/javascript', 'uPlot'],
      ['/node_modules/uplot/dist/uPlot.min.css', 'text/css', '.uplot']]) {
      const res = await fetch(srv.url + p);
      assert.equal(res.status, 200, p);
      assert.ok(res.headers.get('content-type').startsWith(type), `${p}: ${res.headers.get('content-type')}`);
      const body = Buffer.from(await res.arrayBuffer());
      if (has) assert.ok(body.toString().includes(has), `${p} holds ${has}`);
      else assert.deepEqual([...body.subarray(0, 4)], [0, 0x61, 0x73, 0x6d], `${p}: a WebAssembly module`);
    }
    // what the source tree does not ship
    for (const p of ['/README.md', '/package.json'])
      assert.equal((await fetch(srv.url + p)).status, 404, p);
  } finally {
    await srv.stop();
  }

  // the desktop node: the program, its menu entry (which also opens
  // simfarm:// links) and its icon
  const desktopBin = path.join(root, 'bin/simfarm-desktop');
  assert.equal(fs.statSync(desktopBin).mode & 0o777, 0o755);
  const dv = await run(desktopBin, ['--version']);
  assert.equal(dv.code, 0, dv.stderr);
  assert.match(dv.stdout, /^simfarm-desktop \d+\.\d+\.\d+/);
  const entry = fs.readFileSync(path.join(root, 'share/applications/simfarm-desktop.desktop'), 'utf8');
  for (const line of ['Exec=simfarm-desktop %u', 'Icon=simfarm-desktop', 'MimeType=x-scheme-handler/simfarm;'])
    assert.ok(entry.split('\n').includes(line), `the menu entry has ${line}:\n${entry}`);
  const icon = path.join(root, 'share/icons/hicolor/scalable/apps/simfarm-desktop.svg');
  assert.match(fs.readFileSync(icon, 'utf8'), /^<svg /);

  const un = await make(['uninstall', `DESTDIR=${dest}`, `PREFIX=${prefix}`]);
  assert.equal(un.code, 0, un.stdout + un.stderr);
  assert.equal(fs.existsSync(bin), false);
  assert.equal(fs.existsSync(desktopBin), false);
  assert.equal(fs.existsSync(icon), false);
  assert.equal(fs.existsSync(path.join(root, 'share/simfarm')), false);
});

test('install-deps.sh --runtime names the package of every library the binary links', async () => {
  const script = fs.readFileSync(path.join(top, 'scripts/install-deps.sh'), 'utf8');
  const listed = script.match(/RUNTIME_PACKAGES=\(([^)]*)\)/)[1].trim().split(/\s+/);
  const elf = await run('readelf', ['-d', path.join(build, 'bin/simfarm')]);
  assert.equal(elf.code, 0, elf.stderr);
  const needed = [...elf.stdout.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  assert.ok(needed.includes('libuv.so.1') && needed.includes('libpq.so.5'), needed.join(' '));
  for (const lib of needed) {
    const owner = await run('dpkg', ['-S', `*/${lib}`]);
    assert.equal(owner.code, 0, `${lib}: ${owner.stderr}`);
    const pkgs = owner.stdout.trim().split('\n').map((l) => l.split(':')[0]);
    if (pkgs.includes('libc6')) continue; // essential: on every Debian system
    assert.ok(pkgs.some((p) => listed.includes(p)), `${lib} (${pkgs.join(', ')}) is not in RUNTIME_PACKAGES`);
  }
  const check = await run('bash', [path.join(top, 'scripts/install-deps.sh'), '--runtime', '--check']);
  assert.equal(check.code, 0, check.stderr);
  const bad = await run('bash', [path.join(top, 'scripts/install-deps.sh'), '--runtime', '--frobnicate']);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /unknown option '--frobnicate'/);
});
