// The `option` kernel as docs/kernels.md specifies it, in JavaScript
// (tests/vectors/spec_option.mjs), against the stage vectors the kernels
// generate (tests/vectors/kernels.vec): every host-derived value, every
// stage of every traced item and the result bytes of every range, bit for
// bit, for every option parameter set of the file; and the result digest of
// whole runs of a few of those sets against `simfarm sim --json`'s.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import os from 'node:os';
import { build, run, top } from '../lib/proc.mjs';
import { bits, optionJob, optionItem, optionResult, fixed, philox, simExp, simLog } from '../vectors/spec_option.mjs';

const text = fs.readFileSync(path.join(top, 'tests/vectors/kernels.vec'), 'utf8');

// The file's records by set: kind, positional fields and NAME=VALUE fields;
// the sets of several variants apart, with their parameters and results.
const sets = new Map(), everySets = new Map();
for (const line of text.split('\n')) {
  if (line === '' || line.startsWith('#')) continue;
  const t = line.split(' ');
  if (t[0] === 'set') {
    sets.set(t[1], { kernel: t[2], seed: BigInt(t[3].slice(5)), params: JSON.parse(t.slice(4).join(' ')), recs: [] });
    continue;
  }
  if (t[0] === 'variants') { // a set of several variants computed together
    everySets.set(t[1], { kernel: t[2], seed: BigInt(t[3].slice(5)), n: Number(t[4].slice(2)), variants: [],
      results: [] });
    continue;
  }
  if (everySets.has(t[1])) {
    const e = everySets.get(t[1]);
    if (t[0] === 'variant') e.variants[Number(t[2])] = JSON.parse(t.slice(3).join(' '));
    else if (t[0] === 'result') e.results.push(t.slice(2));
    else throw new Error(`${t[1]}: a ${t[0]} line in a set of variants`);
    continue;
  }
  const rec = { kind: t[0], pos: [], kv: {} };
  for (const f of t.slice(2)) {
    const eq = f.indexOf('=');
    if (eq < 0) rec.pos.push(f);
    else rec.kv[f.slice(0, eq)] = f.slice(eq + 1);
  }
  sets.get(t[1]).recs.push(rec);
}
const optionSets = [...sets].filter(([, s]) => s.kernel === 'option');

const hex64 = (x) => bits(x).toString(16).padStart(16, '0');
const word = (w) => w.toString(16).padStart(8, '0');

// Every field the file gives a record must be the JavaScript's; a double
// field is compared by its bits (the decimal in parentheses is for reading).
function same(rec, mine, where) {
  for (const [k, v] of Object.entries(rec.kv)) {
    assert.ok(k in mine, `${where}: the JavaScript has no ${k}`);
    const want = v.replace(/\(.*\)$/, '');
    assert.equal(mine[k], want, `${where}: ${k} (file ${v})`);
  }
}

const f = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, typeof v === 'number' ? hex64(v) : v]));

test('the implementation of the specification keeps to its own known answers', () => {
  // Random123's known answer, written in the specification
  assert.deepEqual(philox([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0]).map(word),
    ['d16cfe09', '94fdcceb', '5001e420', '24126ea1']);
  assert.equal(simExp(0), 1);
  assert.equal(simLog(1), 0);
  // every option set of the file, in its order: one dropped or renamed fails
  assert.deepEqual(optionSets.map(([name]) => name), ['european_call', 'european_put', 'european_call_antithetic',
    'asian_arithmetic_12', 'asian_arithmetic_252', 'asian_geometric_12', 'asian_geometric_252', 'barrier_up_out',
    'barrier_down_in', 'barrier_up_in', 'barrier_down_out', 'european_greeks_antithetic', 'european_put_greeks', 'asian_arithmetic_greeks',
    'asian_geometric_greeks', 'barrier_greeks_antithetic']);
});

// A chunk of every variant (PROTOCOL.md §4, the result data): each
// variant's result in variant order, each in variant 0's layouts.
test('option_every: a chunk of every variant, from the specification', () => {
  const e = everySets.get('option_every');
  assert.ok(e && e.kernel === 'option' && e.n >= 2 && e.variants.length === e.n, 'the file has option_every');
  assert.equal(e.results.length, 4);
  const jobs = e.variants.map((params) => optionJob(params, e.seed));
  for (const p of jobs) p.layouts = jobs[0].layouts;
  for (const [first, count, hex] of e.results)
    assert.equal(jobs.map((p) => optionResult(p, BigInt(first), BigInt(count))).join(''), hex,
      `option_every result [${first}, +${count})`);
});

// A whole run of a set's parameters and seed, computed here from the
// specification alone, against `simfarm sim --json` over the same items:
// the result digest (docs/kernels.md, The result digest: `sha256:` and the
// SHA-256 of the result's bytes) must be the same.
for (const [name, items] of [['european_call', 100000], ['asian_arithmetic_252', 3000], ['asian_geometric_12', 20000],
  ['european_put_greeks', 20000]]) {
  test(`${name}: ${items} items from the specification have simfarm sim's result digest`, async () => {
    const set = sets.get(name);
    const bytes = Buffer.from(optionResult(optionJob(set.params, set.seed), 0n, BigInt(items)), 'hex');
    const mine = `sha256:${crypto.createHash('sha256').update(bytes).digest('hex')}`;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kspec-'));
    try {
      const file = path.join(dir, 'params.json');
      fs.writeFileSync(file, JSON.stringify(set.params));
      const r = await run(path.join(build, 'bin/simfarm'), ['sim', 'option', file, '--items', String(items),
        '--seed', String(set.seed), '--backend', 'cpu', '--json'], { timeoutMs: 60000 });
      assert.equal(r.code, 0, r.stderr);
      const sim = JSON.parse(r.stdout);
      assert.equal(sim.outputs[0].count, items);
      assert.equal(sim.digest, mine, 'the bytes the specification gives differ from simfarm sim\'s');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

for (const [name, set] of optionSets) {
  test(`${name}: host values, every stage of the traced items, and the result bytes`, () => {
    const p = optionJob(set.params, set.seed);
    const items = new Map();
    let layouts = 0, hosts = 0, results = 0;
    for (const rec of set.recs) {
      if (rec.kind === 'layout') {
        const o = p.names.indexOf(rec.pos[0]);
        assert.ok(o >= 0, `${name}: output ${rec.pos[0]}`);
        const l = p.layouts[o];
        same(rec, { frac_bits: String(l.frac_bits), sq_frac_bits: String(l.sq_frac_bits), hist_lo: hex64(l.hist_lo),
          hist_hi: hex64(l.hist_hi) }, `${name} layout ${rec.pos[0]}`);
        layouts++;
      } else if (rec.kind === 'host') {
        const mine = { steps: String(p.steps), ...f({ inv_steps: p.inv_steps, ln_barrier: p.ln_barrier ?? NaN,
          ln_s0: p.ln_s0, drift_dt: p.drift_dt, vol_sqrt_dt: p.vol_sqrt_dt, disc: p.disc }) };
        if (p.greeks) Object.assign(mine, f({ cv: p.cv, cm: p.cm }), ...p.kg.map((k, g) => f({ [`k${g}`]: k })));
        same(rec, mine, `${name} host`);
        hosts++;
      } else if (rec.kind === 'result') {
        const [first, count, hex] = rec.pos;
        assert.equal(optionResult(p, BigInt(first), BigInt(count)), hex, `${name} result [${first}, +${count})`);
        results++;
      } else {
        const item = rec.pos[0];
        if (!items.has(item)) items.set(item, []);
        items.get(item).push(rec);
      }
    }
    assert.equal(layouts, p.names.length);
    assert.ok(hosts >= 2 && results === 4, `${name}: ${hosts} host lines, ${results} results`);
    assert.ok(items.size >= 2, `${name}: no traced items`);

    for (const [item, recs] of items) {
      const trace = { steps: [], paths: [], payoffs: [], greeks: [] };
      const out = optionItem(p, BigInt(item), trace);
      const next = { step: 0, path: 0, payoff: 0, greeks: 0 };
      for (const rec of recs) {
        const where = `${name} item ${item} ${rec.kind} ${JSON.stringify(rec.kv).slice(0, 60)}`;
        if (rec.kind === 'out') {
          const o = p.names.indexOf(rec.pos[1]);
          const fx = fixed(p.layouts[o], out[o]);
          same(rec, { v: hex64(out[o]), q: String(fx.q), q2: String(fx.q2), saturated: String(fx.saturated),
            slot: String(fx.slot) }, where);
          continue;
        }
        const list = { step: trace.steps, path: trace.paths, payoff: trace.payoffs, greeks: trace.greeks }[rec.kind];
        assert.ok(list, `${where}: unknown record`);
        const s = list[next[rec.kind]++];
        assert.ok(s, `${where}: the JavaScript has fewer ${rec.kind} records`);
        let mine;
        if (rec.kind === 'step') {
          mine = { j: String(s.j), ctr: s.ctr.map(word).join(','), out: s.out.map(word).join(','), word: String(s.word),
            radius_word: String(s.word & 1), angle_word: String((s.word & 1) + 2), trig: s.word < 2 ? 'cos' : 'sin',
            quadrant: String(s.quadrant), offset: String(s.offset), folded: s.folded ? '1' : '0',
            ...f({ u: s.u, ln_u: s.lnU, radius: s.radius, a: s.a, sin: s.sin, cos: s.cos, z: s.z }) };
          if ('zsum' in s) Object.assign(mine, f({ zsum: s.zsum, zsq: s.zsq }));
        } else {
          // path, payoff, greeks: indices as integers, flags as 0/1, the rest doubles
          mine = Object.fromEntries(Object.entries(s).map(([k, v]) => [k,
            k === 'a' || k === 'j' ? String(v) : typeof v === 'boolean' ? (v ? '1' : '0') : hex64(v)]));
        }
        if (rec.kind !== 'step') assert.deepEqual(Object.keys(rec.kv).sort(), Object.keys(mine).sort(), `${where}: the fields`);
        same(rec, mine, where);
      }
      for (const k of Object.keys(next)) {
        const n = { step: trace.steps, path: trace.paths, payoff: trace.payoffs, greeks: trace.greeks }[k].length;
        assert.equal(next[k], n, `${name} item ${item}: the file has ${next[k]} ${k} records, the JavaScript ${n}`);
      }
    }
  });
}
