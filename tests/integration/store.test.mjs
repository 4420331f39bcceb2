// The store actor (actors/coord/store.c) against a real PostgreSQL: migrations,
// parameters, errors, 200 queries in flight, NOTIFY, group commit (queued
// groupable queries answered after one commit; a failing one fails alone; a
// connection killed mid-group still answers every query), every connection
// killed under it, and a second store migrating the same database.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { build, run } from '../lib/proc.mjs';
import { startPostgres } from '../lib/pg.mjs';

test('store actor against PostgreSQL', async () => {
  const pg = await startPostgres();
  try {
    const r = await run(path.join(build, 'tests/integration/store_check'), [pg.url], { timeoutMs: 120000 });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const summary = r.stdout.match(/^(\d+) passed, 0 failed$/m);
    assert.ok(summary, r.stdout);
    assert.equal(Number(summary[1]), 9);
  } finally {
    await pg.stop();
  }
});
