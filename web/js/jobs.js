// Jobs: the list with state (and why no node can run it, when none can),
// progress, items/s, ETA, how long it ran, its result, kernel, owner and
// priority, filtered by state, owner and kernel, kept live by job events.
import { api } from './api.js';
import { onEvent } from './events.js';
import { bar, clear, h, message, stateBadge, table } from './dom.js';
import * as fmt from './format.js';
import { blockedOf, progressOf } from './submission.js';

const Z95 = 1.96;

const STATES = ['pending', 'running', 'complete', 'failed', 'cancelled', 'expired'];
const ENDED = new Set(['complete', 'failed', 'cancelled', 'expired']);

export function jobsView(root, query) {
  const f = { state: query.get('state') ?? '', owner: query.get('owner') ?? '', kernel: query.get('kernel') ?? '' };
  const progress = new Map(); // job id -> latest job.progress
  let jobs = [];
  let refetch = null;
  let asked = 0; // the listings asked for: only the latest one's answer is shown
  let live = true;

  const stateSel = h('select', { id: 'f-state', name: 'state' },
    h('option', { value: '' }, 'any'), STATES.map((s) => h('option', { value: s }, s)));
  const ownerIn = h('input', { id: 'f-owner', name: 'owner', type: 'text', autocomplete: 'off' });
  const kernelSel = h('select', { id: 'f-kernel', name: 'kernel' },
    h('option', { value: '' }, 'any'), h('option', { value: 'option' }, 'option'), h('option', { value: 'combat' }, 'combat'));
  stateSel.value = f.state;
  ownerIn.value = f.owner;
  kernelSel.value = f.kernel;
  const status = h('div', { 'aria-live': 'polite' });
  const body = h('div');

  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter jobs',
    onsubmit: (e) => { e.preventDefault(); apply(); } },
  h('div', {}, h('label', { for: 'f-state' }, 'State'), stateSel),
  h('div', {}, h('label', { for: 'f-owner' }, 'Owner'), ownerIn),
  h('div', {}, h('label', { for: 'f-kernel' }, 'Kernel'), kernelSel),
  h('button', { type: 'submit' }, 'Filter'));
  stateSel.addEventListener('change', apply);
  kernelSel.addEventListener('change', apply);

  root.append(h('h1', {}, 'Jobs'), filters, status, body);

  function apply() {
    const q = new URLSearchParams();
    if (stateSel.value) q.set('state', stateSel.value);
    if (ownerIn.value.trim()) q.set('owner', ownerIn.value.trim());
    if (kernelSel.value) q.set('kernel', kernelSel.value);
    const s = q.toString();
    history.replaceState(null, '', `#/jobs${s ? `?${s}` : ''}`);
    f.state = stateSel.value;
    f.owner = ownerIn.value.trim();
    f.kernel = kernelSel.value;
    load();
  }

  // Lists the jobs under the filter as it is now. An answer that comes after
  // a later listing was asked for (an event's, then the filter changed) is
  // dropped, so the latest listing is what shows.
  async function load() {
    const mine = ++asked;
    const q = new URLSearchParams({ limit: '200' });
    for (const k of ['state', 'owner', 'kernel']) if (f[k]) q.set(k, f[k]);
    let got;
    try {
      got = await api('GET', `api/jobs?${q}`);
    } catch (e) {
      if (live && mine === asked) clear(status, message(`Cannot list jobs: ${e.message}`, true));
      return;
    }
    if (!live || mine !== asked) return;
    jobs = got;
    clear(status);
    render();
  }

  function row(j) {
    const p = progress.get(j.id) ?? j.progress;
    const { done, pct } = progressOf(j, p);
    const rate = j.state === 'running' ? p?.items_per_s : null;
    const blocked = ENDED.has(j.state) ? null : blockedOf(p);
    return h('tr', { dataset: { job: j.id } },
      h('td', { class: 'num' }, h('a', { href: `#/jobs/${j.id}` }, j.id)),
      h('td', { class: 'name' }, h('a', { href: `#/jobs/${j.id}` }, j.name || `${j.kernel} job`),
        h('div', { class: 'muted small' }, `${j.kernel}${j.strategy && j.strategy !== 'single' ? ` ${j.strategy}` : ''}`
          + ` · ${j.owner}${j.priority ? ` · priority ${j.priority}` : ''}`)),
      h('td', {}, stateBadge(j.state),
        blocked ? h('div', { class: 'blocked small', dataset: { blocked: j.id } }, `no node can run this: ${blocked}`) : null),
      h('td', {}, h('div', { class: 'row nowrap' }, bar(pct, `job ${j.id} progress`), h('span', { class: 'muted' }, `${Math.floor(pct)}%`))),
      h('td', { class: 'num' }, rate ? fmt.short(rate) : '–'),
      h('td', { class: 'num' }, j.state === 'running' ? fmt.eta(j.items, done, rate) : '–'),
      h('td', { class: 'num duration' }, ranFor(j)),
      h('td', { class: 'result' }, resultText(j)),
      h('td', { class: 'num items' }, fmt.short(j.items)));
  }

  // How long it ran: from its start to its end, or to now while it runs.
  function ranFor(j) {
    const start = Date.parse(j.started_at);
    if (!Number.isFinite(start)) return '–';
    const end = j.finished_at ? Date.parse(j.finished_at) : ENDED.has(j.state) ? NaN : Date.now();
    return Number.isFinite(end) ? fmt.duration(Math.max(0, (end - start) / 1000)) : '–';
  }

  // What it found: a tournament's winner, or the first output with its 95%
  // interval; the error of a job that failed.
  function resultText(j) {
    const r = j.result;
    if (!r) return '–';
    if (r.error) return h('span', { class: 'bad' }, r.error);
    if (typeof r.winner === 'string') return `winner: ${r.winner}`;
    const o = r.outputs?.[0];
    if (!o || !(o.count > 0)) return '–';
    return `${o.name} ${fmt.estimate(o.mean, o.stderr)}${o.stderr > 0 ? ` ± ${fmt.estimate(Z95 * o.stderr, o.stderr)}` : ''}`;
  }

  function render() {
    if (jobs.length === 0) {
      clear(body, message('No jobs match. Submit one from the Submit page.'));
      return;
    }
    clear(body, table(null, [{ text: 'id', class: 'num' }, 'name', 'state', 'progress', { text: 'items/s', class: 'num' },
      { text: 'ETA', class: 'num' }, { text: 'ran', class: 'num' }, 'result', { text: 'items', class: 'num' }],
    jobs.map(row), 'jobs-table'));
  }

  const off = onEvent((e) => {
    if (e.type === 'snapshot') {
      for (const p of e.jobs ?? []) progress.set(p.job, p);
      render();
    } else if (e.type === 'job.progress') {
      progress.set(e.job, e);
      const j = jobs.find((x) => x.id === e.job);
      if (j) {
        if (j.state === 'pending' && blockedOf(e) === null) j.state = 'running';
        const tr = body.querySelector(`tr[data-job="${e.job}"]`);
        tr?.replaceWith(row(j));
      }
    } else if (e.type === 'job.submitted' || e.type === 'job.started' || e.type === 'job.finished') {
      // the row's own fields change: ask again, at most once a second
      if (refetch === null) refetch = setTimeout(() => { refetch = null; load(); }, 1000);
    }
  });

  load();
  return { stop() { live = false; off(); clearTimeout(refetch); } };
}
