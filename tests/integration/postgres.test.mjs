// The test harness's PostgreSQL: a real server in a temporary directory that
// accepts SQL, keeps two clusters apart, and leaves nothing behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startPostgres, psql } from '../lib/pg.mjs';

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

test('a cluster starts, runs SQL, and stops without leftovers', async () => {
  const pg = await startPostgres();
  try {
    assert.equal(await psql(pg, 'select 40 + 2'), '42');
    await psql(pg, 'create table t (id bigint primary key, v text); insert into t values (1, \'a\'), (2, \'b\')');
    assert.equal(await psql(pg, 'select string_agg(v, \',\' order by id) from t'), 'a,b');
    await assert.rejects(psql(pg, 'insert into t values (1, \'dup\')'), /duplicate key/);
  } finally {
    await pg.stop();
  }
  assert.equal(alive(pg.pid), false, 'postgres still running after stop');
  assert.equal(fs.existsSync(pg.dir), false, 'cluster directory left behind');
});

test('two clusters run side by side and do not share data', async () => {
  const [a, b] = await Promise.all([startPostgres(), startPostgres()]);
  try {
    assert.notEqual(a.dir, b.dir);
    await psql(a, 'create table only_in_a (x int)');
    await assert.rejects(psql(b, 'select * from only_in_a'), /does not exist/);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});
