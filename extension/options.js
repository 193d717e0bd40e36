// The options page: switches, callers (pending, allowed, denied) and the stored scripts.
import { ask, el, when, say, keepFresh, userScriptsNotice } from './ui.js';

const $ = (id) => document.getElementById(id);
const status = $('status');
const switches = { endpoint: $('sw-endpoint'), writes: $('sw-writes'), review: $('sw-review') };
const openSources = new Set();
let confirmingDelete = null;

async function act(fn, done) {
  try {
    await fn();
    if (done) say(status, done);
    await render();
  } catch (e) {
    say(status, e.message, 'error');
  }
}

const callerCell = (c) => el('td', {}, el('div', {}, c.name || el('span', { class: 'muted' }, '(no name)')), el('code', {}, c.id));

function table(headers, rows, empty) {
  if (!rows.length) return el('p', { class: 'empty' }, empty);
  return el('table', {}, el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)))), el('tbody', {}, rows));
}

function renderPolicy(policy) {
  switches.endpoint.checked = policy.endpointEnabled;
  switches.writes.checked = policy.writesEnabled;
  switches.review.checked = policy.reviewWrites;

  $('pending').replaceChildren(table(['Caller', 'First seen', 'Last seen', ''], policy.pending.map((c) =>
    el('tr', {}, callerCell(c), el('td', {}, when(c.firstSeen)), el('td', {}, when(c.lastSeen)),
      el('td', { class: 'actions' },
        el('button', { class: 'primary', 'aria-label': `Approve ${c.name || c.id}`, onclick: () => act(() => ask('policy.approve', { id: c.id }), `Approved ${c.id}.`) }, 'Approve'), ' ',
        el('button', { class: 'danger', 'aria-label': `Deny ${c.name || c.id}`, onclick: () => act(() => ask('policy.deny', { id: c.id }), `Denied ${c.id}.`) }, 'Deny')))),
  'Nobody is waiting.'));

  $('allowlist').replaceChildren(table(['Caller', 'Added', 'Last seen', ''], policy.allowlist.map((c) =>
    el('tr', {}, callerCell(c), el('td', {}, when(c.addedAt)), el('td', {}, when(c.lastSeen)),
      el('td', { class: 'actions' },
        el('button', { class: 'danger', 'aria-label': `Remove ${c.name || c.id}`, onclick: () => act(() => ask('policy.remove', { id: c.id }), `Removed ${c.id}.`) }, 'Remove')))),
  'No caller is allowed yet.'));

  $('denied').replaceChildren(table(['Caller', 'Denied', ''], policy.denied.map((c) =>
    el('tr', {}, callerCell(c), el('td', {}, when(c.at)),
      el('td', { class: 'actions' },
        el('button', { 'aria-label': `Forget ${c.name || c.id}`, onclick: () => act(() => ask('policy.remove', { id: c.id }), `Forgot ${c.id}.`) }, 'Forget')))),
  'Nobody is denied.'));
}

const provenance = (who, names) => (who === 'user' ? 'you' : names.get(who) ? `${names.get(who)} (${who})` : who);

function renderScripts(scripts, problems, names) {
  const rows = scripts.map((s) => {
    const rules = [
      ...s.matches.map((m) => `@match ${m}`), ...s.includeGlobs.map((m) => `@include ${m}`),
      ...s.excludeMatches.map((m) => `@exclude-match ${m}`), ...s.excludeGlobs.map((m) => `@exclude ${m}`),
    ];
    const toggle = el('input', { type: 'checkbox', role: 'switch', 'aria-label': `Enabled: ${s.name}`,
      onchange: (e) => act(() => ask('scripts.setEnabled', { uuid: s.uuid, enabled: e.target.checked }), `${e.target.checked ? 'Enabled' : 'Disabled'} ${s.name}.`) });
    toggle.checked = s.enabled;
    const source = el('details', { open: openSources.has(s.uuid), ontoggle: async (e) => {
      if (!e.target.open) { openSources.delete(s.uuid); return; }
      openSources.add(s.uuid);
      await fillSource(e.target, s.uuid);
    } }, el('summary', {}, 'Source (read-only)'), el('pre', { 'aria-label': `Source of ${s.name}` }, '…'));
    if (openSources.has(s.uuid)) fillSource(source, s.uuid);
    const del = confirmingDelete === s.uuid
      ? [el('button', { class: 'danger', onclick: () => { confirmingDelete = null; act(() => ask('scripts.delete', { uuid: s.uuid }), `Deleted ${s.name}.`); } }, `Confirm delete of ${s.name}`), ' ',
         el('button', { onclick: () => { confirmingDelete = null; render(); } }, 'Cancel')]
      : [el('button', { class: 'danger', 'aria-label': `Delete ${s.name}`, onclick: () => { confirmingDelete = s.uuid; render(); } }, 'Delete')];
    return el('tr', {},
      el('td', {}, toggle),
      el('td', {}, el('strong', {}, s.name), s.version ? el('small', {}, ` v${s.version}`) : null,
        el('div', { class: 'muted' }, s.namespace ?? ''), el('code', { class: 'muted' }, s.uuid), source),
      el('td', {}, rules.length ? el('ul', { class: 'rules mono' }, rules.map((r) => el('li', {}, r))) : el('span', { class: 'muted' }, 'runs nowhere')),
      el('td', {}, el('div', {}, 'created by ', provenance(s.createdBy, names), ' ', when(s.createdAt)),
        el('div', {}, 'changed by ', provenance(s.updatedBy, names), ' ', when(s.updatedAt)),
        el('small', {}, `revision ${s.revision}`)),
      el('td', { class: 'actions' }, del));
  });
  const parts = [table(['On', 'Script', 'Runs on', 'Provenance', ''], rows, 'No scripts stored.')];
  if (problems.length) parts.push(el('p', { class: 'notice' }, `${problems.length} stored script record(s) could not be read and are not shown: `, problems.map((p) => `${p.uuid} (${p.message})`).join('; ')));
  $('scripts').replaceChildren(...parts);
}

async function fillSource(details, uuid) {
  try {
    const { script } = await ask('scripts.get', { uuid });
    details.querySelector('pre').textContent = script.source;
  } catch (e) {
    details.querySelector('pre').textContent = `Could not load the source: ${e.message}`;
  }
}

let last = '';
async function render(force = true) {
  const [state, list] = await Promise.all([ask('state.get'), ask('scripts.list')]);
  // Polling must not steal keyboard focus: rebuild only when something changed.
  const key = JSON.stringify([state.policy, state.capability, list, confirmingDelete]);
  if (!force && key === last) return;
  last = key;
  $('capability').replaceChildren(userScriptsNotice(state.capability) ?? '');
  renderPolicy(state.policy);
  const names = new Map(state.policy.allowlist.map((c) => [c.id, c.name]));
  renderScripts(list.scripts, list.problems, names);
}

for (const [name, input] of Object.entries(switches)) {
  input.addEventListener('change', () => act(() => ask('policy.setSwitch', { name, value: input.checked }),
    `${input.labels[0].textContent}: ${input.checked ? 'on' : 'off'}.`));
}

$('add-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const id = $('add-id').value.trim();
  const name = $('add-name').value.trim();
  act(async () => {
    await ask('policy.add', { id, ...(name ? { name } : {}) });
    $('add-id').value = '';
    $('add-name').value = '';
  }, `Added ${id}.`);
});

$('version').textContent = `version ${chrome.runtime.getManifest().version} · id ${chrome.runtime.id}`;
keepFresh(() => render(false), 3000);
render().catch((e) => say(status, e.message, 'error'));
