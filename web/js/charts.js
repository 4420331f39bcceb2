// The job's plots, drawn by uPlot (npm, served from web/node_modules):
// convergence (the running estimate and its 95% band against items done),
// throughput over time, and the histogram of outcomes.
import uPlot from '../node_modules/uplot/dist/uPlot.esm.js';
import { short } from './format.js';

export const COLORS = { line: '#0b5cad', band: 'rgba(11, 92, 173, 0.18)', bars: '#17663a', rate: '#8a3ab9',
  closed: '#c2410c' };

function width(el) {
  return Math.max(260, Math.floor(el.clientWidth || el.parentElement?.clientWidth || 600) - 8);
}

// Keeps a plot as wide as its box.
function fit(plot, el) {
  const ro = new ResizeObserver(() => plot.setSize({ width: width(el), height: plot.height }));
  ro.observe(el);
  return () => ro.disconnect();
}

const axis = { stroke: '#16181d', grid: { stroke: '#e3e7ee' }, ticks: { stroke: '#c9ced8' } };
// Counts and rates as 1.2 M: long numbers would not fit beside the plot.
const counts = { ...axis, values: (u, vals) => vals.map((v) => short(v)) };

// data: [[items done...], [mean...], [lower...], [upper...], [closed form
// or null...]]: the closed form, where the output has one, is a dashed line.
export function convergence(el, name) {
  const opts = {
    width: width(el), height: 240,
    scales: { x: { time: false }, y: { range: lateRange } },
    hooks: { setScale: [(u, key) => { if (key === 'y') showRange(el, u); }] },
    axes: [{ ...counts, label: 'items done' }, { ...axis, label: name, size: 70 }],
    series: [
      { label: 'items' },
      { label: 'estimate', stroke: COLORS.line, width: 2 },
      { label: '95% low', stroke: COLORS.band, width: 1 },
      { label: '95% high', stroke: COLORS.band, width: 1 },
      { label: 'closed form', stroke: COLORS.closed, width: 2, dash: [6, 4] },
    ],
    bands: [{ series: [3, 2], fill: COLORS.band }],
    legend: { live: false },
  };
  const plot = new uPlot(opts, [[], [], [], [], []], el);
  const unfit = fit(plot, el);
  return { set: (data) => plot.setData(data), destroy: () => { unfit(); plot.destroy(); } };
}

// The estimate's axis: the band over the last three quarters of the items
// done (and the closed form), not the first chunks' band, which is wider
// by the square root of how many more items the last point has and would
// flatten the rest to a line. With 3 points or fewer, all of them.
function lateRange(u, dmin, dmax) {
  const [x, , lo, hi, ref] = u.data;
  const n = x?.length ?? 0;
  let a = Infinity, b = -Infinity;
  for (let i = 0; i < n; i++) {
    if (n > 3 && x[i] < x[n - 1] / 4) continue;
    for (const v of [lo[i], hi[i], ref?.[i]]) {
      if (v === null || v === undefined || !Number.isFinite(v)) continue;
      a = Math.min(a, v);
      b = Math.max(b, v);
    }
  }
  if (!(a < b)) return uPlot.rangeNum(dmin ?? 0, dmax ?? 1, 0.1, true);
  const pad = (b - a) * 0.08;
  return [a - pad, b + pad];
}

// The axis's range on the plot's box, for those who read the page
// (data-y-min, data-y-max).
function showRange(el, u) {
  el.dataset.yMin = String(u.scales.y.min);
  el.dataset.yMax = String(u.scales.y.max);
}

// data: [[seconds since start...], [items/s...]].
export function throughput(el) {
  const opts = {
    width: width(el), height: 200,
    scales: { x: { time: false } },
    axes: [{ ...axis, label: 'seconds' }, { ...counts, label: 'items/s', size: 70 }],
    series: [{ label: 's' }, { label: 'items/s', stroke: COLORS.rate, width: 2 }],
    legend: { live: false },
  };
  const plot = new uPlot(opts, [[], []], el);
  const unfit = fit(plot, el);
  return { set: (data) => plot.setData(data), destroy: () => { unfit(); plot.destroy(); } };
}

// hist: {lo, hi, under, over, bins} from the API; drawn as bars at the
// bins' centres.
export function histogram(el, name) {
  const opts = {
    width: width(el), height: 240,
    scales: { x: { time: false } },
    axes: [{ ...axis, label: name }, { ...counts, label: 'count', size: 70 }],
    series: [{ label: name }, {
      label: 'count', stroke: COLORS.bars, fill: COLORS.bars, width: 0,
      paths: uPlot.paths.bars({ size: [0.95, Infinity], align: 0 }), points: { show: false },
    }],
    legend: { live: false },
  };
  const plot = new uPlot(opts, [[], []], el);
  const unfit = fit(plot, el);
  return {
    set(hist) {
      const n = hist.bins.length, w = (hist.hi - hist.lo) / n;
      plot.setData([hist.bins.map((_, i) => hist.lo + (i + 0.5) * w), hist.bins]);
    },
    destroy: () => { unfit(); plot.destroy(); },
  };
}
