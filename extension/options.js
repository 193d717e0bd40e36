// The options page: switches, callers (pending, allowed, denied) and the stored scripts.
//
// With 1,000 scripts the page must not rebuild itself: the script table is keyed by uuid, each
// row is rebuilt only when that script's listing changed, the first render is built in slices so
// the page shows rows at once, and nothing is fetched on a timer but the small state (the
// "Allow User Scripts" toggle has no event). The list is fetched again only when a script's
// record changes in storage.
import { ARM_MS, ask, el, when, say, onStored, oneAtATime, marked, ruleLines, userScriptsNotice } from './ui.js';
import { lastRunCell } from './runs.js';

const $ = (id) => document.getElementById(id);
const status = $('status');
const switches = { endpoint: $('sw-endpoint'), writes: $('sw-writes'), review: $('sw-review') };
const openSources = new Set();
let confirmingDelete = null;
/** With the trash full: the script the Delete being confirmed pushes out of it for good, as the
 *  worker's `trash.list` names it (`nextOut`), said beside "Confirm delete". */
let nextOut = null;
/** Rows built per slice of the first render (or of a large change) before the page may paint. */
const SLICE = 100;

async function act(fn, done, undo) {
  try {
    await fn();
    if (done) say(status, done);
    await Promise.all([refreshState(), refreshScripts()]);
  } catch (e) {
    say(status, e.message, 'error');
    // What failed changed nothing: the control shows what is stored again, not where it was
    // clicked to (a switch left off while writes are still on would mislead).
    undo?.();
    lastPolicy = '';
    await refreshState().catch(() => {});
  }
}

// A caller chooses its own name: the worker sends it with its invisible and direction
// characters as ⟨U+XXXX⟩ markers, shown marked, so a name cannot reorder the id beside it.
const callerCell = (c) => el('td', {}, el('div', {}, c.name ? marked(c.name) : el('span', { class: 'muted' }, '(no name)')), el('code', {}, c.id));

// A caller's buttons take no click for ARM_MS once its row is in a new place (a caller above it
// approved, a new one listed): the second click of a double-click on Approve must not approve
// the caller that moved up into the clicked spot (any extension can put itself in this list).
const placed = {}; // list name -> the ids in the order last shown
/** Takes no click on `e` until `until` (or later, if held longer already); `show(e, held)` says
 *  so on the element. */
function holdOne(e, until, show) {
  e.dataset.armAt = String(Math.max(Number(e.dataset.armAt ?? 0), until));
  // Held already: its timer reads armAt when it fires (a list of 1,000 rows resizes often).
  if (e.dataset.held) return;
  e.dataset.held = '1';
  show(e, true);
  const arm = () => {
    const left = Number(e.dataset.armAt) - Date.now();
    if (left > 0) { setTimeout(arm, left); return; }
    delete e.dataset.held;
    show(e, false);
  };
  setTimeout(arm, until - Date.now());
}
/** Takes no click on these buttons until `until` (or later, if held longer already). */
function hold(buttons, until = Date.now() + ARM_MS) {
  for (const b of buttons) holdOne(b, until, (x, held) => { x.disabled = held; });
}
// Until then every caller button drawn is held (a table redrawn after the page moved).
let movedUntil = 0;
function buttonsFor(list, items) {
  const before = placed[list];
  placed[list] = items.map((c) => c.id);
  return (c, i, ...buttons) => {
    if (before && before[i] !== c.id) hold(buttons);
    if (Date.now() < movedUntil) hold(buttons, movedUntil);
    return el('td', { class: 'actions' }, buttons.flatMap((b, k) => (k ? [' ', b] : [b])));
  };
}
// Whatever changes size above the callers' tables moves every row below it, in place in its
// list: the status line appearing or fading, a notice, a table above. Their buttons then take
// no click for ARM_MS too, as the popup's Undo and review buttons do.
const callerButtons = () => document.querySelectorAll('#pending button, #allowlist button, #denied button');
// A script's switch, one click from changing what runs, is held the same way, and also when its
// own row is in a new place (renderScripts): a write moves its script to the top of the list.
const scriptSwitches = () => document.querySelectorAll('#scripts input[role=switch]');
// Until then every script switch drawn is held too.
let switchesUntil = 0;
const holdSwitches = (until) => {
  switchesUntil = Math.max(switchesUntil, until);
  for (const t of scriptSwitches()) holdSwitch(t, switchesUntil);
};
const moved = new ResizeObserver(() => {
  movedUntil = Date.now() + ARM_MS;
  hold(callerButtons(), movedUntil);
  holdSwitches(movedUntil);
});

/** A script's switch takes no pointer click until `until` (or later, if held longer already).
 *  Held by aria-disabled and its click handler, not `disabled`: a switch with the keyboard focus
 *  keeps it (a disabled one would drop it to the page, and a Space would scroll), and the
 *  keyboard, which follows the row, still toggles it. */
function holdSwitch(toggle, until = Date.now() + ARM_MS) {
  holdOne(toggle, until, (t, held) => (held ? t.setAttribute('aria-disabled', 'true') : t.removeAttribute('aria-disabled')));
}
for (const e of document.querySelectorAll('#capability, #status, main > section:has(#pending), main > section:has(#allowlist), main > section:has(#sw-endpoint)')) moved.observe(e);
// Below the callers, only the scripts' switches move: the denied callers, the import's and the
// update checks' results (one line per answer, four checks at a time), and the list itself (a
// row above rebuilt taller, one added or gone). A reviewer found these unwatched.
const listMoved = new ResizeObserver(() => holdSwitches(Date.now() + ARM_MS));
for (const e of document.querySelectorAll('main > section:has(#denied), #import-results, #update-results, #scripts')) listMoved.observe(e);

function table(headers, rows, empty) {
  if (!rows.length) return el('p', { class: 'empty' }, empty);
  return el('table', {}, el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)))), el('tbody', {}, rows));
}

function renderPolicy(policy) {
  switches.endpoint.checked = policy.endpointEnabled;
  switches.writes.checked = policy.writesEnabled;
  switches.review.checked = policy.reviewWrites;

  const pendingActions = buttonsFor('pending', policy.pending);
  $('pending').replaceChildren(table(['Caller', 'First seen', 'Last seen', ''], policy.pending.map((c, i) =>
    el('tr', {}, callerCell(c), el('td', {}, when(c.firstSeen)), el('td', {}, when(c.lastSeen)),
      pendingActions(c, i,
        el('button', { class: 'primary', 'aria-label': `Approve ${c.name || c.id}`, onclick: () => act(() => ask('policy.approve', { id: c.id }), `Approved ${c.id}.`) }, 'Approve'),
        el('button', { class: 'danger', 'aria-label': `Deny ${c.name || c.id}`, onclick: () => act(() => ask('policy.deny', { id: c.id }), `Denied ${c.id}.`) }, 'Deny')))),
  'Nobody is waiting.'));

  const allowedActions = buttonsFor('allowlist', policy.allowlist);
  $('allowlist').replaceChildren(table(['Caller', 'Added', 'Last seen', ''], policy.allowlist.map((c, i) =>
    el('tr', {}, callerCell(c), el('td', {}, when(c.addedAt)), el('td', {}, when(c.lastSeen)),
      allowedActions(c, i,
        el('button', { class: 'danger', 'aria-label': `Remove ${c.name || c.id}`, onclick: () => act(() => ask('policy.remove', { id: c.id }), `Removed ${c.id}.`) }, 'Remove')))),
  'No caller is allowed yet.'));

  const deniedActions = buttonsFor('denied', policy.denied);
  $('denied').replaceChildren(table(['Caller', 'Denied', ''], policy.denied.map((c, i) =>
    el('tr', {}, callerCell(c), el('td', {}, when(c.at)),
      deniedActions(c, i,
        el('button', { 'aria-label': `Forget ${c.name || c.id}`, onclick: () => act(() => ask('policy.remove', { id: c.id }), `Forgot ${c.id}.`) }, 'Forget')))),
  'Nobody is denied.'));
}

// ---------------------------------------------------------------- scripts

let names = new Map();
const provenance = (who) => (who === 'user' ? 'you' : names.get(who) ? `${names.get(who)} (${who})` : who);

/** uuid -> { tr, key }: the row element shown for a script and the listing it was built from. */
const rows = new Map();
let scripts = [];
let problems = [];
// An ARIA table of grid rows rather than a <table>: each row can then skip layout and paint while
// it is off screen (content-visibility, see options.html), which a table row cannot.
const tbody = el('div', { role: 'rowgroup', class: 'script-rows' });
const scriptTable = el('div', { role: 'table', 'aria-label': 'Stored scripts', class: 'scripts' },
  el('div', { role: 'rowgroup' }, el('div', { role: 'row', class: 'script-row head' },
    ['On', 'Script', 'Runs on · asks for', 'Provenance · last run', ''].map((h) => el('span', { role: 'columnheader' }, h)))),
  tbody);
const emptyNote = el('p', { class: 'empty' }, 'No scripts stored.');
const problemNote = el('p', { class: 'notice' });

/** Everything a row shows: when this is unchanged, the row is kept as it is. */
const rowKey = (s) => JSON.stringify([s, provenance(s.createdBy), provenance(s.updatedBy), confirmingDelete === s.uuid, confirmingDelete === s.uuid && nextOut]);

function scriptRow(s) {
  const rules = ruleLines(s);
  const toggle = el('input', { type: 'checkbox', role: 'switch', 'aria-label': `Enabled: ${s.name}`,
    // Held (holdSwitch): a pointer's click changes nothing, so no change event follows. The
    // keyboard's (detail 0) goes on: the focus moved with the row, so it is the switch meant.
    onclick: (e) => { if (e.detail > 0 && e.target.getAttribute('aria-disabled') === 'true') e.preventDefault(); },
    onchange: (e) => act(() => ask('scripts.setEnabled', { uuid: s.uuid, enabled: e.target.checked }), `${e.target.checked ? 'Enabled' : 'Disabled'} ${s.name}.`,
      () => { e.target.checked = s.enabled; }) });
  toggle.checked = s.enabled;
  if (Date.now() < switchesUntil) holdSwitch(toggle, switchesUntil);
  const source = el('details', { open: openSources.has(s.uuid), ontoggle: async (e) => {
    if (!e.target.open) { openSources.delete(s.uuid); return; }
    openSources.add(s.uuid);
    await fillSource(e.target, s.uuid);
  } }, el('summary', {}, 'Source (read-only)'), el('pre', { 'aria-label': `Source of ${s.name}` }, '…'));
  if (openSources.has(s.uuid)) fillSource(source, s.uuid);
  // Asked before the question is shown, so what the delete also does is there with it.
  const confirm = async (uuid) => {
    const out = uuid ? (await ask('trash.list').catch(() => null))?.nextOut ?? null : null;
    confirmingDelete = uuid;
    nextOut = out;
    renderScripts();
  };
  // "Confirm delete" appears where "Delete" was: it takes no click for ARM_MS, or a
  // double-click on Delete would confirm its own question.
  // Armed by aria-disabled, not disabled: it takes the keyboard focus from Delete at once.
  const confirmButton = () => {
    const b = el('button', { class: 'danger', 'aria-disabled': 'true', onclick: () => {
      if (b.getAttribute('aria-disabled') === 'true') return;
      confirmingDelete = null;
      act(() => ask('scripts.delete', { uuid: s.uuid }), `Deleted ${s.name}.`);
    } }, `Confirm delete of ${s.name}`);
    setTimeout(() => { b.removeAttribute('aria-disabled'); }, ARM_MS);
    return b;
  };
  const del = confirmingDelete === s.uuid
    ? [confirmButton(), ' ', el('button', { onclick: () => confirm(null) }, 'Cancel'),
      nextOut ? el('p', { class: 'notice', role: 'status' }, `The trash is full (${nextOut.max} scripts): this delete removes its oldest, “`,
        marked(nextOut.name ?? '(no name)'), '”, for good.') : null]
    : [el('button', { class: 'danger', 'aria-label': `Delete ${s.name}`, onclick: () => confirm(s.uuid) }, 'Delete')];
  const cell = (...c) => el('div', { role: 'cell' }, ...c);
  // Chrome refused its registration: stored and switched on, but it does not run.
  const refused = s.enabled && typeof s.registrationError === 'string'
    ? el('p', { class: 'notice', 'aria-label': `Registration of ${s.name}` }, `Chrome refused to register it, so it does not run: ${s.registrationError}`)
    : null;
  return el('div', { role: 'row', class: 'script-row', 'data-uuid': s.uuid },
    cell(toggle),
    cell(el('strong', {}, s.name), s.version ? el('small', {}, ' v', marked(s.version)) : null,
      // What the script says it does, as other managers list it (marked as the review shows it).
      s.description ? el('div', { class: 'description', 'aria-label': `Description of ${s.name}` }, marked(s.description)) : null,
      el('div', { class: 'muted' }, s.namespace ?? ''), el('code', { class: 'muted' }, s.uuid), refused, source),
    // Rules and requests come with invisible characters marked (⟨U+XXXX⟩): drawn as marks.
    cell(rules.length ? el('ul', { class: 'rules mono' }, rules.map((r) => el('li', {}, marked(r)))) : el('span', { class: 'muted' }, 'runs nowhere'),
      asks(s)),
    cell(el('div', {}, 'created by ', provenance(s.createdBy), ' ', when(s.createdAt)),
      el('div', {}, 'changed by ', provenance(s.updatedBy), ' ', when(s.updatedAt)),
      el('small', {}, `revision ${s.revision}`),
      // Kept per script by runs.js and moved into a rebuilt row, so it is never rebuilt here.
      lastRunCell(s.uuid)),
    el('div', { role: 'cell', class: 'actions' },
      // The editor and the history live in editor.js.
      el('button', { 'aria-label': `Edit ${s.name}`, onclick: () => document.dispatchEvent(new CustomEvent('lumo:edit', { detail: { uuid: s.uuid } })) }, 'Edit'), ' ',
      el('button', { 'aria-label': `History of ${s.name}`, onclick: () => document.dispatchEvent(new CustomEvent('lumo:history', { detail: { uuid: s.uuid } })) }, 'History'), ' ',
      el('button', { 'aria-label': `Runs of ${s.name}`, onclick: () => document.dispatchEvent(new CustomEvent('lumo:runs', { detail: { uuid: s.uuid, name: s.name } })) }, 'Runs'), ' ',
      // Only a script that names where its updates are (update.js asks and shows the answer).
      typeof s.updateUrl === 'string'
        ? [el('button', { 'aria-label': `Check for update of ${s.name}`, title: `Checks ${s.updateUrl}`, onclick: () => document.dispatchEvent(new CustomEvent('lumo:check-update', { detail: { uuid: s.uuid, name: s.name } })) }, 'Check for update'), ' ']
        : null,
      del));
}

/** What the script asks for beyond running: its grants and the hosts it may send requests to. */
function asks(s) {
  const grants = (s.grants ?? []).filter((g) => g !== 'none');
  const connects = s.connects ?? [];
  const requires = s.requires ?? [];
  // The files stored when the script was written (URL and sha256 of the bytes it runs with).
  const assets = s.assets ?? [];
  const stored = (a) => `${a.name == null ? '@require' : `@resource ${a.name}`} ${a.url} — sha256 ${a.sha256}`
    + (a.finalUrl ? ` (redirected to ${a.finalUrl})` : '');
  const items = [
    ...grants.map((g) => `@grant ${g}`),
    // The worker adds what a line reaches where it may mislead ("* (any site on the internet)").
    ...connects.map((c) => `@connect ${c}`),
    ...(assets.length ? assets.map(stored) : requires.map((r) => `@require ${r}`)),
  ];
  return items.length
    ? el('ul', { class: 'rules mono grants', 'aria-label': `What ${s.name} asks for` }, items.map((r) => el('li', {}, marked(r))))
    : el('div', { class: 'muted', 'aria-label': `What ${s.name} asks for` }, 'no GM functions (@grant none)');
}

let renderGen = 0;
const nextTask = () => new Promise((r) => setTimeout(r, 0));

/** The control of rebuilt row `tr` that stands for `old` (the same label; Delete's question for
 *  Delete, and back), focused. */
function refocus(tr, old) {
  const label = (e) => e.getAttribute('aria-label') ?? e.textContent;
  const controls = [...tr.querySelectorAll('button, input, summary')];
  const same = controls.find((c) => label(c) === label(old))
    ?? controls.find((c) => /^(Confirm delete of|Delete) /.test(label(c)) && /^(Confirm delete of |Delete |Cancel$)/.test(label(old)));
  same?.focus();
}

/** Brings the table in line with `scripts`: new or changed rows are built, the others kept in
 *  place; done in slices so a large change does not block the page. */
async function renderScripts() {
  const gen = ++renderGen;
  const container = $('scripts');
  const parts = [scripts.length ? scriptTable : emptyNote];
  if (problems.length) {
    problemNote.textContent = `${problems.length} stored script record(s) could not be read and are not shown: ${problems.map((p) => `${p.uuid} (${p.message})`).join('; ')}`;
    parts.push(problemNote);
  }
  if (container.childNodes.length !== parts.length || parts.some((p, i) => container.childNodes[i] !== p)) container.replaceChildren(...parts);
  const wanted = new Set(scripts.map((s) => s.uuid));
  // A rebuilt or removed row must not drop the keyboard focus to the page (a Space would then
  // scroll it): it goes to the same control in the new row, or to the row now in its place.
  let lostAt = -1;
  for (const [uuid, row] of rows) {
    if (!wanted.has(uuid)) {
      if (row.tr.contains(document.activeElement)) lostAt = [...tbody.children].indexOf(row.tr);
      row.tr.remove();
      rows.delete(uuid);
    }
  }
  let built = 0;
  // A row now where another was shown takes no click on its switch for ARM_MS: the click aimed
  // at the script that was there must not turn this one on or off (a tester's did).
  const shownBefore = placed.scripts ?? [];
  placed.scripts = scripts.map((s) => s.uuid);
  for (let i = 0; i < scripts.length; i++) {
    const s = scripts[i];
    const key = rowKey(s);
    let row = rows.get(s.uuid);
    if (!row || row.key !== key) {
      const tr = scriptRow(s);
      if (row) {
        const focused = row.tr.contains(document.activeElement) ? document.activeElement : null;
        row.tr.replaceWith(tr);
        if (focused) refocus(tr, focused);
      }
      row = { tr, key };
      rows.set(s.uuid, row);
      built++;
    }
    if (i < shownBefore.length && shownBefore[i] !== s.uuid) holdSwitch(row.tr.querySelector('input[role=switch]'));
    if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] ?? null);
    // The row now in the removed one's place, or the last row when it was the last.
    if (lostAt === i || (lostAt >= scripts.length && i === scripts.length - 1)) row.tr.querySelector('input, button')?.focus();
    if (built >= SLICE) {
      built = 0;
      await nextTask();
      if (gen !== renderGen) return;
    }
  }
}

async function fillSource(details, uuid) {
  try {
    // As JavaScript reads it: every line break JavaScript sees is one, hidden characters marked.
    const { shown } = await ask('scripts.get', { uuid });
    details.querySelector('pre').replaceChildren(...marked(shown));
  } catch (e) {
    details.querySelector('pre').textContent = `Could not load the source: ${e.message}`;
  }
}

// ---------------------------------------------------------------- refresh

let lastPolicy = '';
let lastCapability = '';
const refreshState = oneAtATime(async () => {
  const state = await ask('state.get');
  const capability = JSON.stringify(state.capability);
  if (capability !== lastCapability) {
    lastCapability = capability;
    $('capability').replaceChildren(userScriptsNotice(state.capability) ?? '');
  }
  const policy = JSON.stringify(state.policy);
  if (policy === lastPolicy) return;
  lastPolicy = policy;
  renderPolicy(state.policy);
  const before = JSON.stringify([...names]);
  names = new Map(state.policy.allowlist.map((c) => [c.id, c.name]));
  // A caller's name shows in provenance: only the rows that name it are rebuilt.
  if (JSON.stringify([...names]) !== before && rows.size) renderScripts();
});

let lastList = '';
const refreshScripts = oneAtATime(async () => {
  const list = await ask('scripts.list');
  const key = JSON.stringify([list.scripts, list.problems]);
  if (key === lastList) return;
  lastList = key;
  scripts = list.scripts;
  problems = list.problems;
  await renderScripts();
});

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
onStored(async (keys) => {
  const k = [...keys];
  if (k.includes('local:policy')) await refreshState();
  if (k.some((x) => x === 'local:scripts/index' || x === 'local:registryErrors' || x.startsWith('local:script/'))) await refreshScripts();
}, 100);
// The "Allow User Scripts" toggle has no event: ask for the (small) state now and then.
setInterval(() => refreshState().catch(() => {}), 3000);
// The state first: the caller names are in it, and the rows show them.
refreshState().then(refreshScripts).catch((e) => say(status, e.message, 'error'));
