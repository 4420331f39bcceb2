// Jobs: the list with state, progress, items/s, ETA, owner and priority,
// filtered by state, owner and kernel, kept live by job events.
import { api } from './api.js';
import { onEvent } from './events.js';
import { bar, clear, h, message, stateBadge, table } from './dom.js';
import * as fmt from './format.js';

const STATES = ['pending', 'running', 'complete', 'failed', 'cancelled', 'expired'];

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
    const done = j.state === 'complete' ? j.items : (p?.items_done ?? j.result?.items_done ?? 0);
    const pct = fmt.percent(done, j.items);
    const rate = j.state === 'running' ? p?.items_per_s : null;
    return h('tr', { dataset: { job: j.id } },
      h('td', { class: 'num' }, h('a', { href: `#/jobs/${j.id}` }, j.id)),
      h('td', {}, h('a', { href: `#/jobs/${j.id}` }, j.name || `${j.kernel} job`)),
      h('td', {}, stateBadge(j.state)),
      h('td', {}, h('div', { class: 'row' }, bar(pct, `job ${j.id} progress`), h('span', { class: 'muted' }, `${pct.toFixed(0)}%`))),
      h('td', { class: 'num' }, rate ? fmt.short(rate) : '–'),
      h('td', { class: 'num' }, j.state === 'running' ? fmt.eta(j.items, done, rate) : '–'),
      h('td', {}, j.owner),
      h('td', { class: 'num' }, j.priority),
      h('td', {}, j.kernel),
      h('td', { class: 'num' }, fmt.short(j.items)));
  }

  function render() {
    if (jobs.length === 0) {
      clear(body, message('No jobs match. Submit one from the Submit page.'));
      return;
    }
    clear(body, table(null, [{ text: 'id', class: 'num' }, 'name', 'state', 'progress', { text: 'items/s', class: 'num' },
      { text: 'ETA', class: 'num' }, 'owner', { text: 'priority', class: 'num' }, 'kernel', { text: 'items', class: 'num' }],
    jobs.map(row)));
  }

  const off = onEvent((e) => {
    if (e.type === 'snapshot') {
      for (const p of e.jobs ?? []) progress.set(p.job, p);
      render();
    } else if (e.type === 'job.progress') {
      progress.set(e.job, e);
      const j = jobs.find((x) => x.id === e.job);
      if (j) {
        if (j.state === 'pending') j.state = 'running';
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
