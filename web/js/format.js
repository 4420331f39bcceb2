// Number and time formatting shared by the views. Pure functions: the
// browser tests import this module too.

const grouped = new Intl.NumberFormat('en-US');

export function int(n) {
  return n === null || n === undefined || Number.isNaN(n) ? '–' : grouped.format(Math.round(n));
}

// 1.23 M, 45.6 k: for rates and large counts in little space.
export function short(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const a = Math.abs(n);
  for (const [v, s] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']])
    if (a >= v) return `${(n / v).toFixed(a >= 100 * v ? 0 : a >= 10 * v ? 1 : 2)} ${s}`;
  return n.toFixed(a >= 100 || Number.isInteger(n) ? 0 : 2);
}

// Decimals that show an estimate to one digit past its standard error's
// first significant digit (se 0.0033 gives 4), between 0 and 12.
export function decimalsFor(stderr) {
  if (!(stderr > 0) || !Number.isFinite(stderr)) return 6;
  return Math.min(12, Math.max(0, Math.ceil(-Math.log10(stderr)) + 1));
}

// A mean as the dashboard shows it: to the precision its error supports.
export function estimate(mean, stderr) {
  if (mean === null || mean === undefined || !Number.isFinite(mean)) return '–';
  return mean.toFixed(decimalsFor(stderr));
}

export function num(x, digits = 6) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  return Number(x.toPrecision(digits)).toString();
}

export function percent(done, total) {
  if (!(total > 0)) return 0;
  return Math.min(100, (100 * done) / total);
}

export function duration(s) {
  if (!Number.isFinite(s) || s < 0) return '–';
  if (s < 1) return '< 1 s';
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  const sec = Math.floor(s % 60);
  if (d > 0) return `${d} d ${h} h`;
  if (h > 0) return `${h} h ${m} min`;
  if (m > 0) return `${m} min ${sec} s`;
  return `${sec} s`;
}

// Time left at the current rate, or '–' when it cannot be told.
export function eta(items, done, perSecond) {
  if (!(perSecond > 0) || !(items > done)) return '–';
  return duration((items - done) / perSecond);
}

export function ago(ms, now = Date.now()) {
  if (!ms) return '–';
  const s = Math.max(0, (now - ms) / 1000);
  return s < 2 ? 'just now' : `${duration(s)} ago`;
}

export function bytes(n) {
  if (!(n > 0)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(n >= 10 || i === 0 ? 0 : 1)} ${units[i]}`;
}

export function when(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}
