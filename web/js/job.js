// One job, live over /ws/events: progress and throughput, how much of it
// is verified, the running estimate with its 95% band against items done, the histogram of
// outcomes, what each node contributed, claims in flight, reclaimed and
// failed, the result, a tournament's winner and ranking, stat_weights'
// weights, why no node can run it when none can, the warning it was just
// submitted with through the form; cancelling it (once
// confirmed), submitting it again through the form, and its submission or
// whole record as JSON.
import { api } from './api.js';
import { onEvent } from './events.js';
import { askToken, bar, clear, h, message, stateBadge, table } from './dom.js';
import * as charts from './charts.js';
import * as fmt from './format.js';
import { blockedOf, progressOf, submissionOf, takeWarning } from './submission.js';

const Z95 = 1.96;
const ENDED = new Set(['complete', 'failed', 'cancelled', 'expired']);

export function jobView(root, id) {
  let job = null;
  let prog = null;           // the latest job.progress
  let output = null;         // the output plotted
  const history = new Map(); // output name -> Map(items done -> [mean, stderr])
  const rate = [[], []];     // seconds since the first progress, items/s
  let t0 = null;
  const nodeNames = new Map(); // node id -> name, for the contribution table
  const namesAsked = new Set();
  let plots = [];
  let live = true;
  let end = null;            // the job.finished event: its state and result
  let rereads = 0;           // reads of a row not yet written after the event

  // The row can lag behind the event (the end is written while the event
  // goes out): what the event said stands until the row says it too.
  function applyEnd() {
    if (end === null || job === null || ENDED.has(job.state)) return;
    job.state = end.state;
    if (end.result) job.result = end.result;
  }

  const head = h('div');
  const progressBox = h('section', { 'aria-labelledby': 'h-progress' });
  const plotBox = h('section', { 'aria-labelledby': 'h-plots' });
  const verifyBox = h('section', { 'aria-labelledby': 'h-verification', id: 'verification' });
  const resultBox = h('section', { 'aria-labelledby': 'h-result' });
  const nodesBox = h('section', { 'aria-labelledby': 'h-nodes' });
  const extraBox = h('section');
  const status = h('div', { 'aria-live': 'polite' });
  const confirmBox = h('div');
  root.append(head, confirmBox, status, progressBox, verifyBox, plotBox, resultBox, nodesBox, extraBox);
  const warning = takeWarning(id); // just submitted through the form, with a warning
  if (warning !== null) {
    status.append(h('p', { class: 'msg warning', role: 'status', id: 'submit-warning' },
      `Submitted with a warning: ${warning}.`));
  }

  function point(name, x, mean, stderr) {
    if (mean === null || !Number.isFinite(mean)) return;
    if (!history.has(name)) history.set(name, new Map());
    history.get(name).set(x, [mean, stderr ?? 0]);
  }

  // An output's closed form, or null where it has none.
  function closedForm(name) {
    const ref = outputs().find((o) => o.name === name)?.closed_form;
    return typeof ref === 'number' ? ref : null;
  }

  // The plot's series: items done, the estimate, its 95% band and the
  // closed form (null where there is none).
  function series(name) {
    const pts = [...(history.get(name) ?? new Map())].sort((a, b) => a[0] - b[0]);
    const ref = closedForm(name);
    return [pts.map((p) => p[0]), pts.map((p) => p[1][0]),
      pts.map((p) => p[1][0] - Z95 * p[1][1]), pts.map((p) => p[1][0] + Z95 * p[1][1]), pts.map(() => ref)];
  }

  function record(p) {
    if (!p?.outputs) return;
    for (const o of p.outputs) if (o.count > 0) point(o.name, p.items_done ?? o.count, o.mean, o.stderr);
    if (p.items_per_s !== undefined && job?.state === 'running') {
      const now = performance.now() / 1000;
      if (t0 === null) t0 = now;
      rate[0].push(now - t0);
      rate[1].push(p.items_per_s);
    }
  }

  // Items/s is drawn from the live events this page has seen; a job that
  // ended before the page was opened gets its average instead.
  function throughputNote() {
    if (job?.state === 'running' || rate[0].length > 0) return 'Live, while this page is open.';
    const avg = average();
    if (avg === null) return 'Drawn live while the job runs.';
    return `Ran ${fmt.duration(avg.s)}: ${fmt.short(avg.rate)} items/s on average.`;
  }

  // An ended job's items/s on average: items done over the time from its
  // start to its end (the API keeps no rate over time), or null.
  function average() {
    const s = (Date.parse(job?.finished_at) - Date.parse(job?.started_at)) / 1000;
    const done = job?.result?.items_done;
    if (!ENDED.has(job?.state) || !(s > 0) || !(done > 0)) return null;
    return { s, rate: done / s };
  }

  // What the throughput plot draws: the live rate this page saw, or an
  // ended job's average over its run.
  function rateSeries() {
    if (rate[0].length > 0) return rate;
    const avg = average();
    return avg === null ? [[], []] : [[0, avg.s], [avg.rate, avg.rate]];
  }

  function outputs() {
    return (job?.result?.outputs ?? prog?.outputs ?? []);
  }

  function renderHead() {
    const canCancel = job.state === 'pending' || job.state === 'running';
    if (!canCancel) clear(confirmBox);
    clear(head,
      h('h1', {}, `Job ${job.id}`, job.name ? `: ${job.name}` : ''),
      h('div', { class: 'row' }, 'State: ', stateBadge(job.state),
        canCancel ? h('button', { type: 'button', class: 'danger', id: 'cancel', onclick: askCancel,
          'aria-expanded': confirmBox.childElementCount > 0 ? 'true' : 'false', 'aria-controls': 'cancel-confirm-box' }, 'Cancel job…') : null,
        h('a', { class: 'button secondary', id: 'clone', href: `#/submit?from=${job.id}` }, 'Resubmit…'),
        h('button', { type: 'button', class: 'secondary', id: 'download', onclick: downloadSubmission,
          title: 'the job\'s submission, as POST api/jobs takes it again' }, 'Download JSON'),
        h('button', { type: 'button', class: 'secondary', id: 'download-record', onclick: downloadRecord,
          title: 'the job as GET api/jobs/ID answers it, result included' }, 'Download record')),
      h('dl', { class: 'facts' },
        h('dt', {}, 'kernel'), h('dd', {}, job.kernel),
        h('dt', {}, 'strategy'), h('dd', {}, job.strategy),
        h('dt', {}, 'owner'), h('dd', {}, job.owner),
        h('dt', {}, 'priority'), h('dd', {}, job.priority),
        h('dt', {}, 'items'), h('dd', {}, fmt.int(job.items)),
        h('dt', {}, 'seed'), h('dd', {}, job.seed),
        h('dt', {}, 'tiers'), h('dd', { id: 'tiers' }, job.tiers?.join(', ') ?? '—'),
        h('dt', {}, 'verify'), h('dd', { id: 'verify' }, verifyText(job.verify)),
        h('dt', {}, 'submitted'), h('dd', {}, fmt.when(job.created_at)),
        h('dt', {}, 'finished'), h('dd', { id: 'finished-at' }, fmt.when(job.finished_at)),
        h('dt', {}, 'ran'), h('dd', { id: 'ran' }, ranFor())));
  }

  // From its start to its end, or to now while it runs.
  function ranFor() {
    const start = Date.parse(job.started_at);
    if (!Number.isFinite(start)) return '–';
    const end = job.finished_at ? Date.parse(job.finished_at) : ENDED.has(job.state) ? NaN : Date.now();
    return Number.isFinite(end) ? fmt.duration(Math.max(0, (end - start) / 1000)) : '–';
  }

  // The verification policy: whose results are taken as they come, and
  // the least share of the others checked on another owner's node.
  function verifyText(v) {
    if (!v) return '—';
    const trusted = v.trust?.length ? `trusted: ${v.trust.join(', ')}` : 'no tier trusted';
    const rate = v.check_rate > 0 ? `at least ${+(v.check_rate * 100).toPrecision(4)}% of the rest checked`
      : 'the rest checked as the coordinator decides';
    return `${trusted}; ${rate}`;
  }

  function card(k, v, idName) {
    return h('div', { class: 'card' }, h('div', { class: 'k' }, k), h('div', { class: 'v', id: idName }, v));
  }

  function renderProgress() {
    const p = prog ?? {};
    const { done, pct } = progressOf(job, ENDED.has(job.state) ? null : prog);
    const running = job.state === 'running';
    const blocked = ENDED.has(job.state) ? null : blockedOf(prog);
    // the live progress, or for a job that has ended, its result
    const count = (k) => fmt.int(p[k] ?? job.result?.[k] ?? 0);
    clear(progressBox,
      h('h2', { id: 'h-progress' }, 'Progress'),
      blocked ? h('p', { class: 'blocked', id: 'blocked', role: 'status' }, `no node can run this: ${blocked}`) : null,
      h('div', { class: 'row' }, bar(pct, 'job progress', true), h('strong', { id: 'pct' }, `${pct.toFixed(1)}%`)),
      h('div', { class: 'cards' },
        card('items done', `${fmt.int(done)} / ${fmt.int(job.items)}`, 'items-done'),
        card('items/s', running ? fmt.short(p.items_per_s) : '–', 'rate'),
        card('ETA', running ? fmt.eta(job.items, done, p.items_per_s) : '–', 'eta'),
        card('claims in flight', count('claims_in_flight'), 'claims'),
        card('chunks accepted', count('chunks_accepted'), 'chunks'),
        card('reclaimed', count('reclaims'), 'reclaims'),
        card('chunks failed', count('chunks_failed'), 'chunks-failed'),
        card('items failed', count('items_failed'), 'items-failed')));
  }

  // How much of the result is verified (docs/verification.md): live from
  // the progress, final from the result.
  function renderVerification() {
    const v = job.result?.verification ?? prog?.verification;
    if (!v) { clear(verifyBox); return; }
    const items = job.items || 1;
    const pct = (n) => `${fmt.percent(n ?? 0, items).toFixed(1)}%`;
    const part = (cls, n, what) => h('span', { class: cls, style: `width:${fmt.percent(n ?? 0, items)}%`,
      title: `${what}: ${fmt.int(n)} items (${pct(n)})` });
    const quarantined = v.quarantined_nodes ?? [];
    clear(verifyBox, h('h2', { id: 'h-verification' }, 'Verification'),
      h('div', { class: 'vbar', role: 'img', id: 'v-bar', 'aria-label': `of ${fmt.int(job.items)} items: ${pct(v.verified_items)} `
        + `verified, ${pct(v.trusted_items)} trusted, ${pct(v.unchecked_items)} unchecked` },
      part('v-verified', v.verified_items, 'verified'), part('v-trusted', v.trusted_items, 'trusted'),
      part('v-unchecked', v.unchecked_items, 'unchecked')),
      h('div', { class: 'cards' },
        card('verified items', `${fmt.int(v.verified_items)} (${pct(v.verified_items)})`, 'v-verified'),
        card('trusted items', `${fmt.int(v.trusted_items)} (${pct(v.trusted_items)})`, 'v-trusted'),
        card('unchecked items', `${fmt.int(v.unchecked_items)} (${pct(v.unchecked_items)})`, 'v-unchecked'),
        card('checks passed', fmt.int(v.checks_passed), 'v-passed'),
        card('checks failed', fmt.int(v.checks_failed), 'v-failed'),
        card('checks waiting', fmt.int(v.checks_waiting), 'v-waiting'),
        card('checks abandoned', fmt.int(v.checks_abandoned), 'v-abandoned'),
        card('retracted items', fmt.int(v.retracted_items), 'v-retracted')),
      h('p', { id: 'v-quarantined', class: quarantined.length ? 'quarantined' : 'muted' },
        quarantined.length === 0 ? 'No node quarantined.'
          : ['Quarantined: ', quarantined.map((n, i) => [i ? ', ' : '',
            h('a', { href: `#/nodes?find=${n}`, dataset: { node: n } }, `node ${n}`)])]));
  }

  function setupPlots() {
    for (const p of plots) p.destroy();
    plots = [];
    const outs = outputs();
    if (outs.length === 0) {
      clear(plotBox, h('h2', { id: 'h-plots' }, 'Convergence and outcomes'),
        message(job.state === 'pending' ? 'Waiting for the first results.' : 'No results.'));
      return;
    }
    if (!output || !outs.some((o) => o.name === output)) output = outs[0].name;
    const pick = h('select', { id: 'output-pick', onchange: (e) => { output = e.target.value; setupPlots(); } },
      outs.map((o) => h('option', { value: o.name }, o.name)));
    pick.value = output;
    const ref = closedForm(output);
    const conv = h('div', { class: 'chart', id: 'convergence', role: 'img',
      'aria-label': `running estimate of ${output} with its 95% band against items done`
        + (ref === null ? '' : `, and its closed form ${ref} (dashed)`) });
    const hist = h('div', { class: 'chart', id: 'histogram', role: 'img', 'aria-label': `histogram of ${output}` });
    const thr = h('div', { class: 'chart', id: 'throughput', role: 'img', 'aria-label': 'items per second over time' });
    clear(plotBox, h('h2', { id: 'h-plots' }, 'Convergence and outcomes'),
      outs.length > 1 ? h('div', { class: 'row' }, h('label', { for: 'output-pick' }, 'Output'), pick) : null,
      h('div', { class: 'plots' },
        h('div', { class: 'plot' }, h('h3', {}, `Estimate of ${output} (95% band)`), conv,
          h('p', { class: 'note' }, 'After each accepted chunk (up to 256 points from the journal), then live. The axis '
            + 'covers the band over the last three quarters of the items: the first chunks\' wide band runs off it.'
            + (ref === null ? '' : ' Dashed: the closed form.'))),
        h('div', { class: 'plot' }, h('h3', {}, `Histogram of ${output}`), hist, h('p', { class: 'note', id: 'hist-note' })),
        h('div', { class: 'plot' }, h('h3', {}, 'Throughput'), thr, h('p', { class: 'note', id: 'rate-note' }))));
    plots = [charts.convergence(conv, output), charts.histogram(hist, output), charts.throughput(thr)];
    drawPlots();
  }

  function drawPlots() {
    if (plots.length === 0) return;
    const [conv, hist, thr] = plots;
    const data = series(output);
    conv.set(data);
    document.getElementById('convergence')?.setAttribute('data-points', String(data[0].length));
    const rs = rateSeries();
    thr.set(rs);
    document.getElementById('throughput')?.setAttribute('data-points', String(rs[0].length));
    const rateNote = document.getElementById('rate-note');
    if (rateNote) rateNote.textContent = throughputNote();
    const o = outputs().find((x) => x.name === output);
    if (o?.hist) {
      hist.set(o.hist);
      const note = document.getElementById('hist-note');
      if (note) note.textContent = `${fmt.int(o.hist.under)} below ${fmt.num(o.hist.lo)}, ${fmt.int(o.hist.over)} at or above ${fmt.num(o.hist.hi)}`;
    }
  }

  function renderResult() {
    const res = job.result;
    const outs = outputs();
    const final = res && !res.error;
    const title = final ? 'Result' : 'Running estimate';
    if (res?.error) {
      clear(resultBox, h('h2', { id: 'h-result' }, 'Result'), message(res.error, true));
      return;
    }
    if (outs.length === 0) { clear(resultBox); return; }
    // Where the parameters have a closed form (a European option, a
    // geometric Asian's price), it and the estimate's distance from it in
    // standard errors.
    const closed = outs.some((o) => typeof o.closed_form === 'number');
    const closedCells = (o) => !closed ? [] : typeof o.closed_form !== 'number' ? [h('td', { class: 'num' }, '–'), h('td', { class: 'num' }, '–')]
      : [h('td', { class: 'num closed', dataset: { exact: String(o.closed_form) } }, fmt.estimate(o.closed_form, o.stderr)),
        h('td', { class: 'num z' }, o.stderr > 0 ? ((o.mean - o.closed_form) / o.stderr).toFixed(2) : '–')];
    clear(resultBox, h('h2', { id: 'h-result' }, title),
      table(null, ['output', { text: 'mean', class: 'num' }, { text: '± 95%', class: 'num' }, { text: 'std. error', class: 'num' },
        ...(closed ? [{ text: 'closed form', class: 'num' }, { text: 'z', class: 'num' }] : []),
        { text: 'min', class: 'num' }, { text: 'max', class: 'num' }, { text: 'count', class: 'num' }],
      outs.map((o) => h('tr', { dataset: { output: o.name } },
        h('th', { scope: 'row' }, o.name),
        h('td', { class: 'num mean', dataset: { exact: String(o.mean) } }, fmt.estimate(o.mean, o.stderr)),
        h('td', { class: 'num' }, o.stderr === null ? '–' : fmt.estimate(Z95 * o.stderr, o.stderr)),
        h('td', { class: 'num' }, fmt.num(o.stderr, 3)),
        ...closedCells(o),
        h('td', { class: 'num' }, fmt.num(o.min)),
        h('td', { class: 'num' }, fmt.num(o.max)),
        h('td', { class: 'num' }, fmt.int(o.count))))));
  }

  function renderNodes() {
    const src = job.result?.nodes ? job.result : prog;
    const list = src?.nodes ?? [];
    if (list.length === 0) { clear(nodesBox); return; }
    askNames(list);
    const total = list.reduce((a, n) => a + n.items, 0) || 1;
    const more = (src.nodes_total ?? list.length) - list.length;
    clear(nodesBox, h('h2', { id: 'h-nodes' }, 'Contribution by node'),
      table(null, ['node', { text: 'chunks', class: 'num' }, { text: 'items', class: 'num' }, 'share'],
        list.map((n) => h('tr', {},
          h('td', {}, h('a', { href: `#/nodes/${n.node}`, dataset: { node: n.node } }, nodeNames.get(n.node) ?? `node ${n.node}`)),
          h('td', { class: 'num' }, fmt.int(n.chunks)),
          h('td', { class: 'num' }, fmt.int(n.items)),
          h('td', {}, bar(fmt.percent(n.items, total), `node ${n.node} share`))))),
      more > 0 ? h('p', { class: 'note' }, `and ${more} more nodes`) : null);
  }

  // stat_weights and tournament jobs (docs/api.md): the weights with their
  // errors; a tournament's winner, its candidates by rank and the ladder of
  // phases.
  function renderExtra() {
    const res = job.result ?? {};
    const parts = [];
    if (Array.isArray(res.weights)) {
      const se = (w) => (Number.isFinite(w.stderr) ? w.stderr : 0);
      const span = Math.max(...res.weights.map((w) => Math.abs(w.weight) + Z95 * se(w)), 1e-300);
      parts.push(h('h2', { id: 'h-weights' }, 'Weights'),
        h('p', { class: 'note' }, 'Each weight is the change of the first output\'s mean per unit of its step, '
          + 'with its standard error from the chunks\' paired differences; the bar spans its 95% interval around 0 in the middle.'),
        table(null, ['weight', { text: 'step', class: 'num' }, { text: 'weight', class: 'num' }, { text: 'std. error', class: 'num' },
          { text: '± 95%', class: 'num' }, 'error bar'],
        res.weights.map((w) => {
          const lo = 50 + (50 * (w.weight - Z95 * se(w))) / span, hi = 50 + (50 * (w.weight + Z95 * se(w))) / span;
          return h('tr', { dataset: { weight: w.name } }, h('th', { scope: 'row' }, w.name),
            h('td', { class: 'num step' }, fmt.num(w.step)),
            h('td', { class: 'num value', dataset: { exact: String(w.weight) } }, fmt.estimate(w.weight, w.stderr)),
            h('td', { class: 'num stderr', dataset: { exact: String(w.stderr) } }, fmt.num(w.stderr, 3)),
            h('td', { class: 'num ci' }, Number.isFinite(w.stderr) ? fmt.estimate(Z95 * w.stderr, w.stderr) : '–'),
            h('td', {}, h('div', { class: 'bar', role: 'img', 'aria-label': `${w.name} from ${fmt.num(w.weight - Z95 * se(w))} to ${fmt.num(w.weight + Z95 * se(w))}` },
              h('span', { style: `margin-left:${lo}%;width:${Math.max(hi - lo, 0.5)}%` }))));
        }), 'weights'));
    }
    if (Array.isArray(res.candidates)) {
      const byRank = [...res.candidates].sort((a, b) => (a.rank || Infinity) - (b.rank || Infinity));
      const standing = (c) => (c.name === res.winner ? 'winner' : c.alive ? 'alive' : `dropped after phase ${c.dropped_after}`);
      parts.push(h('h2', { id: 'h-tournament' }, 'Tournament'),
        typeof res.winner === 'string' ? h('p', { class: 'winner', id: 'winner' }, 'Winner: ', h('strong', {}, res.winner))
          : h('p', { class: 'muted', id: 'winner' }, job.state === 'complete' ? 'No winner.' : 'No winner yet.'),
        table(null, [{ text: 'rank', class: 'num' }, 'candidate', 'standing', { text: 'items', class: 'num' },
          { text: 'mean', class: 'num' }, { text: '± 95%', class: 'num' }],
        byRank.map((c) => h('tr', { dataset: { candidate: c.name } },
          h('td', { class: 'num rank' }, c.rank || '–'),
          h('th', { scope: 'row' }, c.name),
          h('td', {}, standing(c)),
          h('td', { class: 'num' }, fmt.int(c.items)),
          h('td', { class: 'num', dataset: { exact: String(c.mean) } }, fmt.estimate(c.mean, c.stderr)),
          h('td', { class: 'num' }, Number.isFinite(c.stderr) ? fmt.estimate(Z95 * c.stderr, c.stderr) : '–'))), 'candidates'));
    }
    if (Array.isArray(res.phases)) {
      parts.push(h('h3', {}, 'Tournament ladder'), h('ol', { id: 'ladder' }, res.phases.map((ph) => h('li', {},
        `phase ${ph.phase}: ${ph.alive} left`, ph.dropped?.length ? `; dropped ${ph.dropped.join(', ')}` : ''))));
    }
    clear(extraBox, parts);
  }

  function render() {
    renderHead();
    renderProgress();
    renderVerification();
    renderResult();
    renderNodes();
    renderExtra();
  }

  async function load() {
    try {
      job = await api('GET', `api/jobs/${id}`);
    } catch (e) {
      clear(head, h('h1', {}, `Job ${id}`), message(e.status === 404 ? 'No such job.' : `Cannot load the job: ${e.message}`, true));
      return;
    }
    if (end !== null && !ENDED.has(job.state) && rereads++ < 20) setTimeout(() => { if (live) load(); }, 250);
    applyEnd();
    if (job.progress) { prog = job.progress; record(prog); }
    if (job.result?.outputs) record({ ...job.result, items_done: job.result.items_done });
    render();
    setupPlots();
    loadHistory();
  }

  // The names of the nodes listed, each asked for once (GET api/nodes/ID:
  // the list is short, the fleet may not be).
  function askNames(list) {
    for (const n of list) {
      if (nodeNames.has(n.node) || namesAsked.has(n.node)) continue;
      namesAsked.add(n.node);
      api('GET', `api/nodes/${n.node}`).then((x) => {
        nodeNames.set(x.id, x.name || `node ${x.id}`);
        if (live) renderNodes();
      }).catch(() => {});
    }
  }

  // The estimate after each accepted chunk so far, from the journal: the
  // curve of a job that ran before this page was opened.
  async function loadHistory() {
    let c;
    try { c = await api('GET', `api/jobs/${id}/convergence`); } catch { return; }
    const names = outputs().map((o) => o.name);
    if (!live || names.length !== c.outputs) return;
    for (const p of c.points) names.forEach((name, o) => point(name, p[0], p[1 + 2 * o], p[2 + 2 * o]));
    drawPlots();
  }

  // Cancelling asks first: it stops the job's chunks and cannot be undone.
  function askCancel() {
    clear(confirmBox, h('div', { class: 'confirm', id: 'cancel-confirm-box', role: 'alertdialog',
      'aria-labelledby': 'cancel-question' },
    h('p', { id: 'cancel-question' }, `Cancel job ${id}? The nodes stop its chunks, and a cancelled job cannot be started again `
      + '(Resubmit makes a new one).'),
    h('div', { class: 'row' },
      h('button', { type: 'button', class: 'danger', id: 'cancel-confirm', onclick: cancel }, 'Yes, cancel it'),
      h('button', { type: 'button', class: 'secondary', id: 'cancel-keep', onclick: keep }, 'No, keep it'))));
    document.getElementById('cancel')?.setAttribute('aria-expanded', 'true');
    document.getElementById('cancel-keep').focus();
  }

  function keep() {
    clear(confirmBox);
    document.getElementById('cancel')?.setAttribute('aria-expanded', 'false');
    document.getElementById('cancel')?.focus();
  }

  async function cancel() {
    const btn = document.getElementById('cancel-confirm');
    btn.disabled = true;
    try {
      await api('POST', `api/jobs/${id}/cancel`);
      clear(confirmBox);
      clear(status, message(`Job ${id} cancelled.`));
      await load();
    } catch (e) {
      btn.disabled = false;
      clear(status, message(`Cannot cancel: ${e.message}`, true));
      if (e.status === 401) askToken();
    }
  }

  function save(obj, file) {
    const blob = new Blob([JSON.stringify(obj, null, 2) + '\n'], { type: 'application/json' });
    const a = h('a', { href: URL.createObjectURL(blob), download: file });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }

  // The submission (POST api/jobs takes it as it is: simfarm submit FILE),
  // and the whole record with its result.
  const downloadSubmission = () => save(submissionOf(job), `simfarm-job-${id}.json`);
  const downloadRecord = () => save(job, `simfarm-job-${id}-record.json`);

  const off = onEvent((e) => {
    if (e.type === 'job.finished' && e.job === id) {
      end = { state: e.state, result: e.result };
      if (job === null) return; // the load in flight applies it
      applyEnd();
      render();
      setupPlots();
      load(); // finished_at, and the row once written
      return;
    }
    if (job === null) return;
    if (e.type === 'snapshot') {
      const p = (e.jobs ?? []).find((x) => x.job === id);
      if (p) e = { ...p, type: 'job.progress' };
      else return;
    }
    if (e.job !== id) return;
    if (e.type === 'job.progress') {
      if (job.state === 'pending' && blockedOf(e) === null) job.state = 'running';
      const first = prog === null;
      prog = e;
      record(e);
      renderProgress();
      renderVerification();
      renderResult();
      renderNodes();
      if (first) { renderHead(); setupPlots(); } else drawPlots();
    } else if (e.type === 'job.started') {
      job.state = 'running';
      renderHead();
    }
  });

  load();
  return { stop() { live = false; off(); for (const p of plots) p.destroy(); } };
}
