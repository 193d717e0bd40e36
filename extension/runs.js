// What scripts did on real page loads, in the options page: each script row's last run (when,
// where, ok or error) and a Runs view with errors and console lines. The worker owns the runs
// (the userscript channel stores them); this page asks `runs.last` / `runs.list` and follows
// the page's incremental rendering: a row's last-run cell is one element kept per script (moved
// into a rebuilt row, never rebuilt itself), refreshed only when that script's `runs/<uuid>` key
// changes; the open Runs view prepends only the runs after the last one it shows.
import { ask, el, when, onStored, marked, reveal } from './ui.js';

const $ = (id) => document.getElementById(id);
/** uuid -> the last-run element of that script's row. */
const cells = new Map();
const stale = new Set();
let flushing = null;

function fillCell(cell, run) {
  if (!run) { cell.replaceChildren(el('span', { class: 'muted' }, 'no run seen yet')); return; }
  cell.replaceChildren(
    el('span', { class: run.ok ? 'run-ok' : 'run-error' }, run.ok ? 'ran ok' : 'threw'), ' ', when(run.at),
    el('div', { class: 'muted mono', title: run.url }, run.url));
}

async function flush() {
  while (stale.size) {
    const uuids = [...stale].slice(0, 500);
    uuids.forEach((u) => stale.delete(u));
    try {
      const { last } = await ask('runs.last', { uuids });
      for (const u of uuids) { const c = cells.get(u); if (c) fillCell(c, last[u]); }
    } catch { /* the row keeps what it showed */ }
  }
  flushing = null;
}

function refresh(uuid) {
  stale.add(uuid);
  flushing ??= new Promise((r) => setTimeout(r, 0)).then(flush);
}

/** The element for a script row's last run (the same element every time for a script). */
export function lastRunCell(uuid) {
  let cell = cells.get(uuid);
  if (!cell) {
    cell = el('div', { class: 'last-run', 'data-last-run': uuid }, '…');
    cells.set(uuid, cell);
    refresh(uuid);
  }
  return cell;
}

// ---------------------------------------------------------------- the Runs view

let open = null; // { uuid, name, cursor, list }

const at = (e) => (e.line ? ` (line ${e.line}${e.column ? `, column ${e.column}` : ''})` : '');

function runItem(r) {
  const err = r.error;
  return el('li', { class: `run ${r.ok ? 'ok' : 'error'}`, 'data-run': String(r.id) },
    el('div', {}, el('strong', {}, r.ok ? 'ok' : 'error'), ' ', when(r.at), ' ',
      el('small', {}, `revision ${r.revision} · ${r.runAt} · ${r.durationMs} ms${r.frameId ? ` · frame ${r.frameId}` : ''}`)),
    el('div', { class: 'mono muted' }, r.url),
    // The worker marks the script's invisible and direction characters ⟨U+XXXX⟩ (runs.list).
    err ? el('div', { class: 'run-error mono' }, ...marked(`${err.name}: ${err.message}`), at(err)) : null,
    ...(r.lateErrors ?? []).map((e) => el('div', { class: 'run-error mono' }, ...marked(`later${e.rejection ? ' (unhandled rejection)' : ''}: ${e.name}: ${e.message}`), at(e))),
    r.lateErrorsDropped ? el('small', {}, `${r.lateErrorsDropped} more later error(s) not kept`) : null,
    r.console.length ? el('pre', { class: 'console', 'aria-label': 'Console output' },
      r.console.map((c) => el('div', { class: `log-${c.level}` }, `${c.level}${c.line ? ` (line ${c.line})` : ''}: `, ...marked(c.text)))) : null,
    r.consoleDropped ? el('small', {}, `${r.consoleDropped} more console line(s) not kept`) : null);
}

async function loadRuns() {
  if (!open) return;
  const view = open;
  const res = await ask('runs.list', { uuid: view.uuid, ...(view.cursor ? { since: view.cursor } : {}) });
  if (open !== view) return;
  view.cursor = res.cursor;
  // Newest first: new runs go on top; what is shown stays where it is.
  // A run shown before that has since had a later error comes back: it replaces its old item.
  for (const r of res.runs) view.list.querySelector(`li[data-run="${CSS.escape(String(r.id))}"]`)?.remove();
  const fresh = res.runs.map(runItem);
  view.list.prepend(...fresh);
  while (view.list.children.length > 100) view.list.lastChild.remove();
  $('runs-empty').hidden = view.list.children.length > 0;
  $('runs-dropped').textContent = res.dropped ? `${res.dropped} report(s) refused: the script sent too many.` : '';
}

export async function openRuns(uuid, name) {
  const list = el('ol', { class: 'runs', 'aria-label': `Runs of ${name}` });
  open = { uuid, name, cursor: 0, list };
  $('runs-title').textContent = `Runs of ${name}`;
  $('runs').replaceChildren(list);
  $('runs-section').hidden = false;
  try { await loadRuns(); } catch (e) { $('runs').replaceChildren(el('p', { class: 'notice' }, e.message)); }
}

document.addEventListener('lumo:runs', async (e) => {
  await openRuns(e.detail.uuid, e.detail.name);
  reveal($('runs-section'));
});
$('runs-close').addEventListener('click', () => { $('runs-section').hidden = true; open = null; });

// Runs of incognito pages are kept in session storage (memory only), under the same keys.
onStored((keys) => {
  for (const k of keys) {
    const m = /^(?:local|session):runs\/(.+)$/.exec(k);
    if (!m || m[1] === 'cursor' || m[1] === 'budget') continue;
    const uuid = m[1];
    if (cells.has(uuid)) refresh(uuid);
    if (open?.uuid === uuid) loadRuns().catch(() => {});
  }
}, 100);
