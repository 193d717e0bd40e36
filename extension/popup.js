// The popup: writes waiting for review (with every effect and the diff), the connected indicator
// with one-click disconnect, and the audit log (filter, export).
import { ARM_MS, ask, el, when, say, onStored, oneAtATime, marked, userScriptsNotice, fileHead, codeView, fillCode } from './ui.js';
import { undoButton } from './undo.js';
import { menuSection } from './popup-menu.js';
import { tabSection } from './popup-tab.js';

const $ = (id) => document.getElementById(id);
const status = $('status');
let entries = [];
/** The entries Undo can revert, as the worker marked them. */
let undoable = new Set();
let names = new Map();
/** Each audit target's name, as the worker gives it beside the log (marked). */
let scriptNames = {};

// `lumo`: what the provider did by itself (the trash deleting a script whose 30 days were over).
const who = (id) => (id === 'user' ? 'you' : id === 'lumo' ? 'Lumo, by itself' : names.get(id) ? `${names.get(id)} (${id})` : id);

// A script deleted for good: its name (kept in the entry, the script being gone) and why: by
// itself (`lumo`), or the user's own Delete forever / Empty trash.
const WHY = { expired: '30 days in the trash were over', trashFull: 'the trash was full', deletedForever: 'Delete forever or Empty trash' };
/** An entry's script: the name the write left it with (kept in the entry) or else its name when
 *  the worker knows it (stored, or in the trash), the name it has now when that differs, and
 *  the start of its uuid, which tells two scripts of one name apart (the whole uuid as the title). */
const target = (uuid, then) => {
  const now = Object.hasOwn(scriptNames, uuid) ? scriptNames[uuid] : null;
  const name = then ?? now;
  return el('small', { title: uuid }, ' ',
    name === null ? '' : ['“', ...marked(name), '” · '],
    now !== null && now !== name ? ['now “', ...marked(now), '” · '] : '', uuid.slice(0, 8));
};
const purgedNote = (p) => p && el('div', { class: 'purged' }, el('small', {},
  '“', p.name ? marked(p.name) : '(no name)', '” left the trash for good: ', WHY[p.why] ?? String(p.why)));


// ---------------------------------------------------------------- reviews
//
// A review is approved by a click, so nothing may move under the pointer: reviews are listed by
// arrival (the service worker's seq), new ones are appended at the end, an item is never rebuilt
// once shown, and one that stops waiting keeps its place (greyed, buttons gone) until the pointer
// leaves the list. Every button names its review by id. A newly shown review's buttons wait
// ARM_MS before they take a click, so a review appearing where the pointer already is cannot
// catch a click meant for something else.
const shown = new Map(); // review id -> { li, session, done: boolean, deciding?: boolean }
let pointerInside = false;
const section = $('reviews-section');
const list = $('reviews');
section.addEventListener('pointerenter', () => { pointerInside = true; });
section.addEventListener('pointerleave', () => { pointerInside = false; sweep(); });

function diffView(text) {
  const pre = el('pre', { class: 'diff', 'aria-label': 'Changes', tabindex: '0' });
  fillDiff(pre, text);
  return pre;
}

// One node appended at a time: spread as arguments, a diff of 130,000 lines overflowed the stack.
function fillDiff(pre, text) {
  const all = document.createDocumentFragment();
  for (const line of text.split('\n')) {
    const cls = line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : 'ctx';
    all.append(el('span', { class: cls }, marked(line)));
  }
  pre.replaceChildren(all);
}

// The local bridge is a caller without an extension id: its label names it, and its Disconnect
// closes the WebSocket with 4002 and forgets the user's authorization of its token.
const disconnect = (caller, kind) => (kind === 'bridge'
  ? act(() => ask('bridge.disconnect'), `Disconnected ${who(caller)}.`)
  // An allowed extension may open a new connection at once: the user is told how to keep it out.
  : act(() => ask('sessions.disconnect', { id: caller }), `Disconnected ${who(caller)}. It can connect again while it is allowed: remove it in Settings to keep it out.`));

function partialNote(r) {
  const hidden = r.diffTotalLines - r.diffShownLines;
  const what = hidden > 0
    ? `Not all of the change is shown: ${r.diffShownLines} of ${r.diffTotalLines} lines; ${hidden} more line${hidden > 1 ? 's are' : ' is'} not shown.`
    : `Not all of the change is shown: the last line is cut short.`;
  return what;
}

function diffBlock(r) {
  if (r.diff == null) return null;
  const pre = diffView(r.diff);
  if (!r.diffPartial) return pre;
  const note = el('p', { class: 'notice', role: 'note' }, el('strong', {}, partialNote(r)), ' ');
  const more = el('button', { type: 'button' }, 'Show the whole change');
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const { diff } = await ask('reviews.diff', { review: r.id });
      holdHeight(note.closest('li'));
      fillDiff(pre, diff);
      note.firstChild.textContent = `Showing the whole change: ${r.diffTotalLines} lines. Scroll to read all of it.`;
      more.textContent = 'Whole change shown';
    } catch (e) {
      more.disabled = false;
      say(status, e.message, 'error');
    }
  });
  note.append(more);
  return el('div', {}, note, pre);
}

// The @require/@resource files a write adds, as fetched for its review: the approved write stores
// exactly these bytes, so their code is shown beside the diff, marked as the diff is.
function fileBlock(r, f, index) {
  const [head, note] = fileHead(f);
  if (f.text == null) return el('div', { class: 'file' }, head, note);
  const pre = codeView(f);
  if (!f.partial) return el('div', { class: 'file' }, head, note, pre);
  const lines = (n) => `${n} line${n === 1 ? '' : 's'}`;
  // The files of a review share one preview: a file past it shows no line until asked.
  const part = el('p', { class: 'notice', role: 'note' }, el('strong', {}, f.shownLines === 0
    ? `Its code (${lines(f.totalLines)}) is not in this preview.`
    : f.shownLines < f.totalLines
      ? `Not all of this file is shown: ${f.shownLines} of ${lines(f.totalLines)}.`
      : 'Not all of this file is shown: its last line shown is cut short.'), ' ');
  if (f.shownLines === 0) pre.hidden = true;
  const more = el('button', { type: 'button' }, 'Show the whole file');
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const { text } = await ask('reviews.file', { review: r.id, index });
      holdHeight(part.closest('li'));
      fillCode(pre, text.replace(/\n$/, ''));
      pre.hidden = false;
      part.firstChild.textContent = `Showing the whole file: ${lines(f.totalLines)}. Scroll to read all of it.`;
      more.textContent = 'Whole file shown';
    } catch (e) {
      more.disabled = false;
      say(status, e.message, 'error');
    }
  });
  part.append(more);
  return el('div', { class: 'file' }, head, note, part, pre);
}

function reviewItem(r) {
  const decide = (approve, allowSession, done) => async () => {
    for (const b of buttons) b.disabled = true;
    // An approval is answered once the write is done: it may still not apply. Meanwhile the
    // review leaves the worker's list, and this item waits for that answer, not for the list.
    const item = shown.get(r.id);
    if (item) item.deciding = true;
    // "Approve all" approves the session's other waiting writes too (the worker does): they
    // leave the list as approved, not as "decided, cancelled or expired".
    const alongside = allowSession
      ? [...shown].filter(([id, it]) => id !== r.id && it.session === r.session && !it.done && !it.deciding)
      : [];
    for (const [, it] of alongside) {
      it.deciding = true;
      for (const b of it.li.querySelectorAll('.actions button')) b.disabled = true;
    }
    if (approve) say(status, 'Approved; applying…');
    try {
      const { applied, why, alsoApproved } = await ask('reviews.decide', { review: r.id, approve, ...(allowSession ? { allowSession } : {}) });
      const approvedWith = new Set(alsoApproved ?? []);
      for (const [id, it] of alongside) {
        if (approvedWith.has(id)) finish(id, 'Approved with “Approve all” on another write of this session.');
        else { // not waiting when the worker decided: the next refresh says why
          it.deciding = false;
          for (const b of it.li.querySelectorAll('.actions button')) b.disabled = false;
        }
      }
      const n = approvedWith.size;
      const also = n === 0 ? '' : n === 1 ? ' Its other waiting write was approved with it.' : ` Its ${n} other waiting writes were approved with it.`;
      if (applied === false) {
        const text = `Approved, but not applied: ${why}${also}`;
        say(status, text, 'error');
        finish(r.id, text);
        return;
      }
      const text = (applied === null ? `${done} Still being applied: the log below will show the result.` : done) + also;
      say(status, text);
      finish(r.id, text);
    } catch (e) {
      for (const [, it] of alongside) {
        it.deciding = false;
        for (const b of it.li.querySelectorAll('.actions button')) b.disabled = false;
      }
      // Chrome's own words when the worker stopped before it answered (R15 showed them raw).
      const stopped = /message channel closed|Receiving end does not exist/i.test(e.message);
      const text = stopped
        ? 'The extension restarted before it answered: the log below says what became of this write.'
        : e.message;
      say(status, text, 'error');
      finish(r.id, stopped ? text : 'No longer waiting.');
    }
  };
  const buttons = [
    el('button', { class: 'primary', 'data-review': r.id, onclick: decide(true, false, 'Approved.') }, 'Approve'),
    // The local bridge is one link for every MCP client that uses it: the allowance covers them all.
    r.caller.startsWith('bridge:')
      ? el('button', { 'data-review': r.id, onclick: decide(true, true, 'Approved; further writes through this bridge, from any MCP client using it, will not ask.') }, 'Approve all from this bridge (every MCP client using it)')
      : el('button', { 'data-review': r.id, onclick: decide(true, true, 'Approved; further writes on this connection will not ask.') }, 'Approve all from this session'),
    el('button', { class: 'danger', 'data-review': r.id, onclick: decide(false, false, 'Denied.') }, 'Deny'),
  ];
  for (const b of buttons) b.disabled = true;
  setTimeout(() => { if (!shown.get(r.id)?.done) for (const b of buttons) b.disabled = false; }, ARM_MS);
  const effects = r.effects?.length
    ? el('ul', { class: 'effects', 'aria-label': 'Effects' }, r.effects.map((e) => el('li', {}, marked(e))))
    : null;
  return el('li', { class: 'review', 'data-review': r.id, 'data-seq': r.seq },
    el('p', {}, el('strong', {}, marked(r.summary))),
    el('p', { class: 'muted' }, 'asked by ', r.callerName ? marked(r.callerName) : '(no name)', ' ', el('code', {}, r.caller), ` · ${r.tool}`),
    // On a line of its own: the countdown changes width every second and must not rewrap the line.
    el('p', { class: 'muted' }, 'expires ', when(r.expiresAt)),
    effects,
    (r.files ?? []).map((f, i) => fileBlock(r, f, i)),
    diffBlock(r),
    el('div', { class: 'row actions' }, buttons));
}

/** An item changing in place never gets shorter: what is below it stays where it was. */
function holdHeight(li) {
  if (li) li.style.minHeight = `${li.getBoundingClientRect().height}px`;
}

/** A review stops waiting: it keeps its place (so nothing below moves) until the pointer leaves. */
function finish(id, text) {
  const item = shown.get(id);
  if (!item || item.done) return;
  item.done = true;
  holdHeight(item.li);
  item.li.classList.add('done');
  item.li.querySelector('.actions').replaceChildren(el('span', { class: 'muted' }, text));
  if (!pointerInside && !section.matches(':hover')) sweep();
}

function sweep() {
  for (const [id, item] of shown) {
    if (item.done) {
      item.li.remove();
      shown.delete(id);
    }
  }
  section.hidden = shown.size === 0;
}

function renderReviews(reviews) {
  const waiting = new Set(reviews.map((r) => r.id));
  for (const [id, item] of shown) if (!item.done && !item.deciding && !waiting.has(id)) finish(id, 'No longer waiting: decided, cancelled or expired.');
  for (const r of [...reviews].sort((a, b) => a.seq - b.seq)) {
    if (shown.has(r.id)) continue;
    const li = reviewItem(r);
    shown.set(r.id, { li, session: r.session, done: false });
    list.append(li);
  }
  section.hidden = shown.size === 0;
}

// ---------------------------------------------------------------- sessions, audit

function renderSessions(sessions) {
  for (const s of sessions) if (s.label) names.set(s.caller, s.label);
  const byCaller = new Map();
  for (const s of sessions) byCaller.set(s.caller, [...(byCaller.get(s.caller) ?? []), s]);
  if (!byCaller.size) {
    $('sessions').replaceChildren(el('li', { class: 'empty' }, 'No agent is connected.'));
    return;
  }
  $('sessions').replaceChildren(...[...byCaller].map(([caller, list]) => el('li', { class: 'row' },
    el('span', { class: 'grow' }, el('span', { class: 'dot', 'aria-hidden': 'true' }), who(caller),
      // On a line of its own: a long name or id wrapping would leave a separator dangling.
      el('small', { class: 'block' }, `${list.length}\u00a0connection${list.length > 1 ? 's' : ''} · since `, when(Math.min(...list.map((s) => s.openedAt))))),
    el('button', { class: 'danger', 'aria-label': `Disconnect ${names.get(caller) || caller}`,
      onclick: () => disconnect(caller, list[0].kind) }, 'Disconnect'))));
}

// A bridge link that ended or was refused says why (a refusing hello_ack's reason included).
function renderBridge({ bridge }) {
  $('bridge-status').replaceChildren(bridge.state !== 'connected' && bridge.error
    ? el('p', { class: 'notice', role: 'status' }, `${bridge.label}: ${bridge.state === 'retrying' ? 'reconnecting. ' : ''}`, bridge.error)
    : '');
}

// An Undo is taken by a click too. While the pointer is in the list, new entries wait (a count
// beside the heading says how many) and are shown when it leaves, so no row moves under it. When the list
// moves anyway (it was rebuilt, or something above it changed size: the status line after an
// Undo, a session, a review), every Undo waits ARM_MS before it takes a click again, so the
// second click of a double-click cannot undo the write that moved under the pointer.
const auditList = $('audit');
let auditHeld = false;
let armTimer = 0;
const inAudit = () => auditList.matches(':hover');
auditList.addEventListener('pointerleave', () => { if (auditHeld) renderAudit(); });
function disarmUndo() {
  const undos = () => auditList.querySelectorAll('button.undo');
  for (const b of undos()) b.disabled = true;
  clearTimeout(armTimer);
  armTimer = setTimeout(() => { for (const b of undos()) if (!b.dataset.busy) b.disabled = false; }, ARM_MS);
}
const moved = new ResizeObserver(disarmUndo);
for (const e of document.querySelectorAll('main > *:not(#audit-section), #audit-section > :not(#audit)')) moved.observe(e);

/** The audit rows drawn at most, newest first. */
const SHOWN = 200;

function renderAudit() {
  if (inAudit() && auditList.childElementCount) {
    auditHeld = true;
    const top = Number(auditList.dataset.newest ?? 0);
    const waiting = entries.filter((e) => e.at > top).length;
    $('audit-new').textContent = waiting ? `+${waiting} new` : '';
    return;
  }
  auditHeld = false;
  $('audit-new').textContent = '';
  auditList.dataset.newest = String(entries[0]?.at ?? 0);
  const caller = $('f-caller').value;
  const result = $('f-result').value;
  const shownEntries = entries.filter((e) => (!caller || e.caller === caller)
    && (!result || (result === 'ok' ? e.result === 'ok' : e.result !== 'ok')));
  const callers = [...new Set(entries.map((e) => e.caller))];
  const select = $('f-caller');
  const have = [...select.options].map((o) => o.value).filter(Boolean);
  if (have.join() !== callers.join()) {
    select.replaceChildren(el('option', { value: '' }, 'All'), ...callers.map((c) => el('option', { value: c }, who(c))));
    select.value = callers.includes(caller) ? caller : '';
  }
  const row = (e) => el('li', {},
    el('span', { class: 'what' }, el('span', { class: e.result === 'ok' ? 'ok' : 'bad' }, e.result), ` ${e.tool}`, e.count > 0 ? ` (${e.count} script${e.count === 1 ? '' : 's'})` : '', e.unchanged ? ' (no change)' : '',
      e.target ? target(e.target, e.name) : null, purgedNote(e.purged), el('div', {}, el('small', {}, who(e.caller))), undoButton(e, undoable.has(e))),
    el('small', {}, when(e.at)));
  // The newest SHOWN rows; past them, only what can still be undone, and how many are not shown
  // (R17: rows past the 200th were cut off silently, Undo of an hour-old write out of reach).
  const older = shownEntries.slice(SHOWN);
  const stillUndoable = older.filter((e) => undoable.has(e));
  const hidden = older.length - stillUndoable.length;
  const more = older.length === 0 ? [] : [el('li', { class: 'empty' },
    hidden === 0 ? 'Older entries you can still undo:'
      : `${hidden} older entr${hidden === 1 ? 'y is' : 'ies are'} not shown (Export has every one; the filters narrow the list)${stillUndoable.length ? '. Below: the older ones you can still undo.' : '.'}`),
  ...stillUndoable.map(row)];
  auditList.replaceChildren(...(shownEntries.length ? [...shownEntries.slice(0, SHOWN).map(row), ...more]
    : [el('li', { class: 'empty' }, entries.length ? 'No entry matches the filters.' : 'No write has been attempted yet.')]));
  disarmUndo();
}

// ---------------------------------------------------------------- refresh

async function act(fn, done) {
  try {
    await fn();
    if (done) say(status, done);
    await refreshState();
  } catch (e) {
    say(status, e.message, 'error');
  }
}

let lastState = '';
const refreshState = oneAtATime(async () => {
  const state = await ask('state.get');
  renderReviews(state.reviews);
  // The rest is rebuilt only when it changed (a rebuild would move keyboard focus).
  const key = JSON.stringify([state.policy, state.capability, state.sessions, state.bridge]);
  if (key === lastState) return;
  const namesBefore = JSON.stringify([...names]);
  lastState = key;
  names = new Map(state.policy.allowlist.map((c) => [c.id, c.name]));
  $('capability').replaceChildren(userScriptsNotice(state.capability) ?? '');
  const waiting = state.policy.pending.length;
  $('approvals').replaceChildren(waiting
    ? el('p', { class: 'notice', role: 'status' }, `${waiting} caller${waiting > 1 ? 's' : ''} waiting for approval. `,
      el('button', { onclick: () => chrome.runtime.openOptionsPage() }, 'Review in settings'))
    : '');
  renderSessions(state.sessions);
  renderBridge(state);
  if (JSON.stringify([...names]) !== namesBefore) renderAudit();
});

let lastAudit = '';
const refreshAudit = oneAtATime(async () => {
  const audit = await ask('audit.list');
  const key = JSON.stringify([audit.entries.length, audit.entries[0]]);
  if (key === lastAudit) return;
  lastAudit = key;
  entries = audit.entries;
  undoable = new Set((audit.undoable ?? []).map((i) => entries[i]));
  scriptNames = audit.names ?? {};
  renderAudit();
});

$('open-options').addEventListener('click', () => chrome.runtime.openOptionsPage());
$('f-caller').addEventListener('change', renderAudit);
$('f-result').addEventListener('change', renderAudit);
$('export').addEventListener('click', async () => {
  const { entries } = await ask('audit.list');
  const blob = new Blob([JSON.stringify(entries, null, 2)], { type: 'application/json' });
  const a = el('a', { href: URL.createObjectURL(blob), download: `lumo-userscripts-audit-${new Date().toISOString().slice(0, 19)}.json` });
  document.body.append(a);
  a.click();
  a.remove();
});

// Reviews and the policy are in storage (the review stubs in the session area): refresh when they
// change. Open sessions are not, so a small state poll covers them; the audit log is read only
// when it changes.
onStored(async (keys) => {
  const k = [...keys];
  if (k.some((x) => x.startsWith('local:audit/'))) await refreshAudit();
  if (k.some((x) => x === 'session:reviews' || x === 'local:policy')) await refreshState();
});
setInterval(() => refreshState().catch(() => {}), 1000);
menuSection($('menu-section'), $('menu'), status);
tabSection($('tab-section'), $('tab-scripts'), status);
Promise.all([refreshState(), refreshAudit()]).catch((e) => say(status, e.message, 'error'));
