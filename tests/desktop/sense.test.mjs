// The desktop node's sensing (node-desktop/sense.c) on its own: the probe
// build/tests/desktop/sense_probe against UPower, logind and GNOME's idle
// monitor mocked by python3-dbusmock on private buses (sense_check.py says
// what is checked: battery changes, the idle time from either source or
// none, the sleep inhibitor held once and released, services that come
// and go, the autostart entry).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run, top } from '../lib/proc.mjs';

test('battery, idle time and the sleep inhibitor, sensed from mocked UPower, logind and idle monitor', async (t) => {
  const probe = path.join(build, 'tests/desktop/sense_probe');
  const r = await run('/usr/bin/python3', [path.join(top, 'tests/desktop/sense_check.py'), probe], { timeoutMs: 120000 });
  if (r.code === 77) {
    t.skip(`sense_check.py could not run here: ${r.stdout.trim().split('\n').pop()}`);
    return;
  }
  assert.equal(r.code, 0, `sense_check.py failed:\n${r.stdout}\n${r.stderr}`);
});
