// The scheduler actor with the store and a real PostgreSQL: jobs farmed
// chunk by chunk come out bit-identical to one local run, completions get
// the four outcomes, and a restart resumes from the journal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run, top } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';

test('scheduler actor against PostgreSQL', async () => {
  const pg = await startPostgres();
  try {
    const r = await run(path.join(build, 'tests/integration/scheduler_check'), [pg.url, path.join(top, 'examples')],
      { timeoutMs: 180000 });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const summary = r.stdout.match(/^(\d+) passed, 0 failed$/m);
    assert.ok(summary, r.stdout);
    assert.equal(Number(summary[1]), 16);
  } finally {
    await pg.stop();
  }
});
