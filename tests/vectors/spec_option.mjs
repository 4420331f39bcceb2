// spec_option.mjs — the `option` kernel and the statistics in JavaScript,
// written from docs/kernels.md ("Specification", "Kernel `option`") alone:
// Philox4x32-10, the word-to-uniform conversion, sim_log, sim_exp, the
// octant sine and cosine, Box–Muller, every style's path with antithetic
// pairs and its Greeks (pathwise, or likelihood ratios for the barriers),
// the layouts, the fixed point (BigInt), the statistics' msgpack bytes and
// a chunk's result bytes. tests/wasm/kernel_spec.test.mjs
// holds it to tests/vectors/kernels.vec bit for bit. Where it needed more
// than the text says, the text was completed.

const buf = new DataView(new ArrayBuffer(8));

/** The 64-bit pattern of a double, as a BigInt. */
export function bits(x) {
  buf.setFloat64(0, x);
  return buf.getBigUint64(0);
}

/** The double of a 64-bit pattern (BigInt, taken modulo 2^64). */
export function fromBits(b) {
  buf.setBigUint64(0, BigInt.asUintN(64, b));
  return buf.getFloat64(0);
}

/** A hex-float literal as the spec writes it ('-0x1.8p+52'): exact. */
export function hexf(s) {
  const m = /^(-?)0x([0-9a-f])(?:\.([0-9a-f]*))?p([+-]\d+)$/.exec(s);
  if (!m) throw new Error(`not a hex float: ${s}`);
  const frac = m[3] ?? '';
  const mant = Number.parseInt(m[2] + frac, 16); // below 2^53: exact
  const v = mant * 2 ** (Number(m[4]) - 4 * frac.length);
  return m[1] ? -v : v;
}

// ---- Philox4x32-10 -------------------------------------------------------------

const M0 = 0xD2511F53n, M1 = 0xCD9E8D57n, W0 = 0x9E3779B9, W1 = 0xBB67AE85;

/** Philox4x32-10 of counter [c0, c1, c2, c3] under key [k0, k1]: four words. */
export function philox(ctr, key) {
  let [c0, c1, c2, c3] = ctr;
  let [k0, k1] = key;
  for (let r = 0; r < 10; r++) {
    const p0 = M0 * BigInt(c0), p1 = M1 * BigInt(c2);
    const n0 = (Number(p1 >> 32n) ^ c1 ^ k0) >>> 0;
    const n2 = (Number(p0 >> 32n) ^ c3 ^ k1) >>> 0;
    c1 = Number(p1 & 0xffffffffn);
    c3 = Number(p0 & 0xffffffffn);
    c0 = n0;
    c2 = n2;
    k0 = (k0 + W0) >>> 0;
    k1 = (k1 + W1) >>> 0;
  }
  return [c0, c1, c2, c3];
}

/** (w + 1/2) 2^-32, as the spec computes it. */
export function u01(w) {
  return (((w ^ 0x80000000) | 0) + 2147483648.5) * hexf('0x1p-32');
}

// ---- deterministic math --------------------------------------------------------

const LN2_HI = hexf('0x1.62e42feep-1');
const LN2_LO = hexf('0x1.a39ef35793c76p-33');
const SQRT2 = hexf('0x1.6a09e667f3bcdp+0');
const LG = ['0x1.5555555555593p-1', '0x1.999999997fa04p-2', '0x1.2492494229359p-2', '0x1.c71c51d8e78afp-3',
  '0x1.7466496cb03dep-3', '0x1.39a09d078c69fp-3', '0x1.2f112df3e5244p-3'].map(hexf); // Lg1 .. Lg7
const INV_LN2 = hexf('0x1.71547652b82fep+0');
const SHIFT = hexf('0x1.8p+52');
const E = ['0x1.af38a9b0ec855p-26', '0x1.289185613a3d6p-22', '0x1.71de0dae63bb3p-19', '0x1.a019b90d2ae7ap-16',
  '0x1.a01a01a7c41d5p-13', '0x1.6c16c1788bd9p-10', '0x1.11111111109b3p-7', '0x1.5555555553d63p-5',
  '0x1.5555555555556p-3', '0x1.0000000000001p-1', '0x1p+0', '0x1p+0'].map(hexf);
const S = ['0x1.5e0b05bff20f2p-33', '-0x1.ae600aca92c64p-26', '0x1.71de379654304p-19', '-0x1.a01a019e83816p-13',
  '0x1.1111111110bb2p-7', '-0x1.5555555555555p-3'].map(hexf);
const C = ['-0x1.907d8f29fe831p-37', '0x1.1eeb68cd22f56p-29', '-0x1.27e4fa17bf139p-22', '0x1.a01a019f4e9b4p-16',
  '-0x1.6c16c16c16967p-10', '0x1.5555555555555p-5'].map(hexf);
const QUARTER = hexf('0x1.921fb54442d18p-30');

/** Natural logarithm of a positive normal double. */
export function simLog(x) {
  const b = bits(x);
  const e = Number((b >> 52n) & 0x7ffn) - 1023;
  let m = fromBits((b & 0x000fffffffffffffn) | 0x3ff0000000000000n);
  const big = m > SQRT2 ? 1 : 0;
  m = big ? m * 0.5 : m;
  const ed = e + big;
  const f = m - 1.0;
  const s = f / (2.0 + f);
  const z = s * s;
  const w = z * z;
  const t1 = w * (LG[1] + w * (LG[3] + w * LG[5]));
  const t2 = z * (LG[0] + w * (LG[2] + w * (LG[4] + w * LG[6])));
  const rr = t2 + t1;
  const hfsq = (0.5 * f) * f;
  return ed * LN2_HI - ((hfsq - (s * (hfsq + rr) + ed * LN2_LO)) - f);
}

/** e^x. */
export function simExp(x) {
  let xc = x > 709.0 ? 709.0 : x;
  xc = xc < -708.0 ? -708.0 : xc;
  const t = xc * INV_LN2 + SHIFT;
  const kd = t - SHIFT;
  const r = (xc - kd * LN2_HI) - kd * LN2_LO;
  let p = E[0];
  for (let i = 1; i < 12; i++) p = p * r + E[i];
  const twoK = fromBits((bits(t) + 1023n) << 52n);
  return x < -708.0 ? 0.0 : p * twoK;
}

/** [sin a, cos a] for a in [0, pi/4]. */
export function sincosOct(a) {
  const a2 = a * a;
  const ps = ((((S[0] * a2 + S[1]) * a2 + S[2]) * a2 + S[3]) * a2 + S[4]) * a2 + S[5];
  const pc = ((((C[0] * a2 + C[1]) * a2 + C[2]) * a2 + C[3]) * a2 + C[4]) * a2 + C[5];
  return [a + a * (a2 * ps), 1.0 - a2 * (0.5 - a2 * pc)];
}

/** Box–Muller on (radius word, angle word): the pair and its stages. */
export function normalPair(wr, wa) {
  const u = u01(wr), lnU = simLog(u), radius = Math.sqrt(-2.0 * lnU);
  const quadrant = wa >>> 30, offset = wa & 0x3fffffff;
  const md = offset;
  const folded = md > 536870912.0;
  const a = (folded ? 1073741824.0 - md : md) * QUARTER;
  const [sn, cs] = sincosOct(a);
  const swap = folded !== (quadrant === 1 || quadrant === 3);
  const rc = radius * cs, rs = radius * sn;
  const zc = (swap ? rs : rc) * (quadrant === 1 || quadrant === 2 ? -1.0 : 1.0);
  const zs = (swap ? rc : rs) * (quadrant >= 2 ? -1.0 : 1.0);
  return { u, lnU, radius, quadrant, offset, folded, a, sin: sn, cos: cs, zc, zs };
}

// ---- the option kernel ---------------------------------------------------------

const STYLES = ['european', 'asian_arithmetic', 'asian_geometric', 'barrier'];

/** frexp's exponent: bound = f 2^e, 0.5 <= f < 1 (bound a positive normal). */
function frexpExp(x) {
  return Number((bits(x) >> 52n) & 0x7ffn) - 1022;
}

/** sim_layout_make. */
export function layoutMake(bound, lo, hi) {
  const e = frexpExp(bound);
  const fb = 55 - e, sqfb = 55 - 2 * e;
  return { frac_bits: fb, sq_frac_bits: sqfb, scale: 2 ** fb, sq_scale: 2 ** sqfb, hist_lo: lo, hist_hi: hi,
    inv_width: 32.0 / (hi - lo) };
}

const abs = (x) => (x < 0 ? -x : x);

/** A job of the option kernel: parameters (a JSON object) and seed (BigInt). */
export function optionJob(params, seed) {
  const p = {
    style: STYLES.indexOf(params.style ?? 'european'), put: (params.type ?? 'call') === 'put',
    s0: params.S0, k: params.K, r: params.r ?? 0, q: params.q ?? 0, sigma: params.sigma, t: params.T,
    steps: params.steps ?? 1, barrier: params.barrier, barrierType: params.barrier_type,
    antithetic: !!params.antithetic, greeks: !!params.greeks,
  };
  if (p.style < 0) throw new Error(`unknown style ${params.style}`);
  const { s0, k, r, q, sigma, t } = p;
  p.steps_d = p.steps;
  p.inv_steps = 1.0 / p.steps_d;
  p.up = p.barrierType === 'up_out' || p.barrierType === 'up_in';
  p.in = p.barrierType === 'up_in' || p.barrierType === 'down_in';
  if (p.style === 3) p.ln_barrier = simLog(p.barrier);
  const dt = t / p.steps_d;
  p.ln_s0 = simLog(s0);
  p.drift_dt = ((r - q) - (0.5 * sigma) * sigma) * dt;
  p.vol_sqrt_dt = sigma * Math.sqrt(dt);
  p.disc = simExp((-r) * t);
  const mu = (r - q) - (0.5 * sigma) * sigma;
  if (p.greeks && p.style === 3) {
    const sqrtDt = Math.sqrt(t / p.steps_d);
    p.cv = p.vol_sqrt_dt;
    p.cm = ((2.0 * mu) * sqrtDt) / sigma;
    p.kg = [p.disc / (s0 * p.vol_sqrt_dt), p.disc / sigma, p.disc * (sqrtDt / sigma), p.disc / (2.0 * t)];
  } else if (p.greeks) {
    const tau = p.style === 0 ? t : p.style === 2 ? (t * (p.steps_d + 1.0)) / (2.0 * p.steps_d) : t / p.steps_d;
    const dn = p.style === 1 ? p.disc * p.inv_steps : p.disc;
    p.cv = ((r - q) + (0.5 * sigma) * sigma) * tau;
    p.cm = mu * tau;
    p.kg = [p.disc / s0, dn / sigma, dn * tau, dn / (2.0 * t)];
  }
  const big = s0 > k ? s0 : k;
  const drift = abs(r - q);
  let bound = (2.0 * big) * simExp((8.0 * sigma) * Math.sqrt(t) + drift * t);
  if (p.style === 3 && p.barrier > bound) bound = p.barrier;
  const hist = params.hist ?? [0.0, 2.0 * big];
  p.names = ['price'];
  p.layouts = [layoutMake(bound, hist[0], hist[1])];
  if (p.greeks) {
    const b8 = greekBounds(p, 8.0), b3 = greekBounds(p, 3.0);
    ['delta', 'vega', 'rho', 'theta'].forEach((n, g) => {
      p.names.push(n);
      p.layouts.push(layoutMake(b8[g], -b3[g], b3[g]));
    });
  }
  p.key = [Number(seed & 0xffffffffn), Number(seed >> 32n)];
  return p;
}

/** B_g(ns), the Greeks' bounds of "Layouts". */
function greekBounds(p, ns) {
  const { s0, k, r, q, sigma, t } = p;
  const st = Math.sqrt(t), g = abs(r - q), am = abs((r - q) - (0.5 * sigma) * sigma), ar = abs(r);
  const big = s0 > k ? s0 : k;
  const df = p.disc > 1.0 ? p.disc : 1.0;
  const m = simExp((ns * sigma) * st + g * t);
  const bb = ((2.0 * big) * m) * df;
  if (p.style !== 3) {
    return [(2.0 * m) * df, bb * (ns * st + sigma * t), (2.0 * t) * bb, bb * ((ar + am) + (ns * sigma) / st)];
  }
  const n = p.steps_d, zb = ns * Math.sqrt(n), qb = ns * Math.sqrt(2.0 * n) + ns * ns;
  const sqrtDt = Math.sqrt(t / n), acm = abs(p.cm);
  return [(bb * ns) / (s0 * p.vol_sqrt_dt), (bb * (qb + p.vol_sqrt_dt * zb)) / sigma,
    bb * ((sqrtDt * zb) / sigma + t), bb * (ar + (qb + acm * zb) / (2.0 * t))];
}

/** One item (a BigInt index): its outputs, and with trace its stages. */
export function optionItem(p, item, trace = null) {
  const k = Number(item & 3n), blk = item >> 2n, wr = k & 1;
  const na = p.antithetic ? 2 : 1;
  const arithG = p.greeks && p.style === 1, lr = p.greeks && p.style === 3;
  const lns = [], sum = [], hit = [], sum2 = [], sum3 = [];
  let zsum = 0.0, zsq = 0.0, z1 = 0.0;
  for (let a = 0; a < na; a++) {
    lns.push(p.ln_s0);
    sum.push(0.0);
    hit.push(false);
    sum2.push(0.0);
    sum3.push(0.0);
  }
  for (let j = 0; j < p.steps; j++) {
    const ctr = [j, 0, Number(blk & 0xffffffffn), Number(blk >> 32n)];
    const w = philox(ctr, p.key);
    const n = normalPair(w[wr], w[wr + 2]);
    const z = k < 2 ? n.zc : n.zs;
    const step = { j, ctr, out: w, word: k, z, ...n };
    if (lr) {
      if (j === 0) z1 = z;
      zsum = zsum + z;
      zsq = zsq + z * z;
      Object.assign(step, { zsum, zsq });
    }
    trace?.steps.push(step);
    for (let a = 0; a < na; a++) {
      const sgn = a ? -1.0 : 1.0;
      lns[a] = lns[a] + (p.drift_dt + p.vol_sqrt_dt * (sgn * z));
      const st = { a, j, lns: lns[a] };
      if (p.style === 1) {
        st.e = simExp(lns[a]);
        sum[a] = sum[a] + st.e;
        st.sum = sum[a];
        if (arithG) {
          sum2[a] = sum2[a] + st.e * (j + 1);
          sum3[a] = sum3[a] + st.e * (lns[a] - p.ln_s0);
          Object.assign(st, { sum2: sum2[a], sum3: sum3[a] });
        }
      } else if (p.style === 2) {
        sum[a] = sum[a] + lns[a];
        st.sum = sum[a];
      } else if (p.style === 3) {
        hit[a] = hit[a] || (p.up ? lns[a] >= p.ln_barrier : lns[a] <= p.ln_barrier);
        st.hit = hit[a];
      }
      trace?.paths.push(st);
    }
  }
  const pay = [], es = [0.0, 0.0, 0.0, 0.0], w = p.put ? -1.0 : 1.0;
  for (let a = 0; a < na; a++) {
    const lx = p.style === 1 || p.style === 2 ? sum[a] * p.inv_steps : lns[a];
    const x = p.style === 1 ? lx : simExp(lx);
    let payoff = p.put ? p.k - x : x - p.k;
    payoff = payoff > 0.0 ? payoff : 0.0;
    pay.push(p.style === 3 && hit[a] !== p.in ? 0.0 : payoff);
    const rec = { a, x, payoff, pay: pay[a] };
    if (p.greeks) {
      const sgn = a ? -1.0 : 1.0, fp = pay[a] > 0.0 ? w : 0.0;
      let e;
      if (lr) {
        const zsa = sgn * zsum, zqn = zsq - p.steps_d;
        e = [pay[a] * (sgn * z1), pay[a] * (zqn - p.cv * zsa), pay[a] * zsa, pay[a] * (zqn + p.cm * zsa)];
      } else if (arithG) {
        e = [fp * x, fp * (sum3[a] - p.cv * sum2[a]), fp * sum2[a], fp * (sum3[a] + p.cm * sum2[a])];
      } else {
        const ell = lx - p.ln_s0;
        rec.ell = ell;
        e = [fp * x, fp * (x * (ell - p.cv)), 0, fp * (x * (ell + p.cm))];
        e[2] = e[0];
      }
      e.forEach((v, g) => {
        rec[`e${g}`] = v;
        es[g] = a ? es[g] + v : v;
      });
    }
    trace?.payoffs.push(rec);
  }
  const price = na === 2 ? ((pay[0] + pay[1]) * p.disc) * 0.5 : pay[0] * p.disc;
  const out = [price];
  if (p.greeks) {
    const m = es.map((v, g) => (na === 2 ? (v * p.kg[g]) * 0.5 : v * p.kg[g]));
    trace?.greeks.push({ m0: m[0], m1: m[1], m2: m[2], m3: m[3] });
    out.push(m[0], m[1], m[2] - p.t * price, p.r * price - m[3]);
  }
  return out;
}

// ---- statistics ----------------------------------------------------------------

const LIM = 2 ** 56, CLAMP = 2 ** 56 - 16, MASK192 = (1n << 192n) - 1n, FIX_MAX = (1n << 56n) - 1n;

function fix(y) {
  const out = !(y < LIM && y > -LIM);
  let v = Number.isNaN(y) ? 0.0 : y;
  v = v < LIM ? v : CLAMP;
  v = v > -LIM ? v : -CLAMP;
  return [BigInt(Math.trunc(v)), out];
}

/** One value's fixed-point terms and histogram slot under layout l. */
export function fixed(l, x) {
  const [q, o1] = fix(x * l.scale);
  const [q2, o2] = fix((x * x) * l.sq_scale);
  const b = (x - l.hist_lo) * l.inv_width;
  const bc = b >= 0.0 ? (b < 32.0 ? b : 32.0) : -1.0;
  return { q, q2, saturated: o1 || o2 ? 1 : 0, slot: 1 + Math.trunc(bc) };
}

export function statsNew(l) {
  return { l, count: 0n, sum: 0n, sumsq: 0n, min: FIX_MAX, max: -FIX_MAX, saturated: 0n, hist: new Array(34).fill(0n) };
}

export function statsAdd(s, x) {
  const f = fixed(s.l, x);
  s.count += 1n;
  s.sum = (s.sum + f.q) & MASK192;
  s.sumsq = (s.sumsq + f.q2) & MASK192;
  s.min = f.q < s.min ? f.q : s.min;
  s.max = f.q > s.max ? f.q : s.max;
  s.saturated += BigInt(f.saturated);
  s.hist[f.slot] += 1n;
}

function packUint(out, v) {
  v = BigInt(v);
  if (v < 128n) out.push(Number(v));
  else if (v < 256n) out.push(0xcc, Number(v));
  else if (v < 65536n) pushBE(out, 0xcd, v, 2);
  else if (v < 1n << 32n) pushBE(out, 0xce, v, 4);
  else pushBE(out, 0xcf, v, 8);
}

function packInt(out, v) {
  v = BigInt(v);
  if (v >= 0n) return packUint(out, v);
  if (v >= -32n) out.push(Number(v & 0xffn));
  else if (v >= -128n) pushBE(out, 0xd0, v, 1);
  else if (v >= -32768n) pushBE(out, 0xd1, v, 2);
  else if (v >= -(1n << 31n)) pushBE(out, 0xd2, v, 4);
  else pushBE(out, 0xd3, v, 8);
}

function pushBE(out, tag, v, n) {
  out.push(tag);
  const u = BigInt.asUintN(8 * n, v);
  for (let i = n - 1; i >= 0; i--) out.push(Number((u >> BigInt(8 * i)) & 0xffn));
}

function packF64(out, x) {
  pushBE(out, 0xcb, bits(x), 8);
}

/** sim_stats_encode: the bytes, as an array of numbers. */
export function statsEncode(s) {
  const out = [0x9c, 0x01];
  packInt(out, s.l.frac_bits);
  packInt(out, s.l.sq_frac_bits);
  packF64(out, s.l.hist_lo);
  packF64(out, s.l.hist_hi);
  packUint(out, s.count);
  for (const w of [s.sum, s.sumsq]) {
    out.push(0x93);
    for (let i = 0n; i < 3n; i++) packUint(out, (w >> (64n * i)) & 0xffffffffffffffffn);
  }
  packInt(out, s.min);
  packInt(out, s.max);
  packUint(out, s.saturated);
  out.push(0xdc, 0x00, 0x22);
  for (const h of s.hist) packUint(out, h);
  return out;
}

/** A chunk's result bytes for items [first, first + count) of an option job, as hex. */
export function optionResult(p, first, count) {
  const st = p.layouts.map(statsNew);
  for (let i = first; i < first + count; i++) {
    const out = optionItem(p, i);
    out.forEach((x, o) => statsAdd(st[o], x));
  }
  const bytes = [];
  for (const s of st) {
    const e = statsEncode(s);
    bytes.push(e.length & 0xff, (e.length >> 8) & 0xff, (e.length >> 16) & 0xff, e.length >>> 24, ...e);
  }
  return Buffer.from(bytes).toString('hex');
}
