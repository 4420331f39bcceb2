// A job's accepted item ranges in the journal, and what docs/reliability.md
// promises of them: they tile [0, items) once for each variant, with no gap
// and no overlap.
import assert from 'node:assert/strict';
import { psql } from './pg.mjs';

// The accepts of job id: [{ variant, first, count, seq }], by variant, then
// by first item.
export async function accepts(pg, id, opts) {
  const out = await psql(pg, 'SELECT variant, first_item, item_count, seq FROM journal ' +
    `WHERE job_id = ${id} AND type = 1 ORDER BY variant, first_item, seq`, opts);
  return out.split('\n').filter(Boolean).map((l) => {
    const [variant, first, count, seq] = l.split('|').map(Number);
    return { variant, first, count, seq };
  });
}

// Asserts that list (from accepts()) holds the variants given and tiles
// [0, items) once in each; a failure names the accept and its neighbours.
export function assertTiles(list, items, variants = [0]) {
  assert.ok(list.length > 0, 'the journal holds accepts');
  assert.deepEqual([...new Set(list.map((r) => r.variant))], variants, 'the variants the journal holds accepts of');
  for (const v of variants) {
    const mine = list.filter((r) => r.variant === v);
    let next = 0;
    for (const r of mine) {
      assert.equal(r.first, next, `journal, variant ${v}: an accept of [${r.first}, ${r.first + r.count}) ` +
        `(seq ${r.seq}) where ${next} was expected: ${r.first < next ? 'an overlap' : 'a gap'}; the accepts ` +
        `around it: ${JSON.stringify(mine.filter((x) => x.first < r.first + r.count && x.first + x.count > next - 1))}`);
      next = r.first + r.count;
    }
    assert.equal(next, items, `journal, variant ${v}: the accepts end at ${next}, not at the job's ${items} items`);
  }
}
