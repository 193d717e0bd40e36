// The popup: connected indicator with one-click disconnect, pending reviews with their diff,
// and the audit log (filter, export).
import { ask, el, when, say, keepFresh, userScriptsNotice } from './ui.js';

const $ = (id) => document.getElementById(id);
const status = $('status');
let entries = [];
let names = new Map();

async function act(fn, done) {
  try {
    await fn();
    if (done) say(status, done);
    await render(true);
  } catch (e) {
    say(status, e.message, 'error');
  }
}

const who = (id) => (names.get(id) ? `${names.get(id)} (${id})` : id);

function diffView(text) {
  const pre = el('pre', { class: 'diff', 'aria-label': 'Changes' });
  for (const line of text.split('\n')) {
    const cls = line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : undefined;
    pre.append(el('span', { class: cls }, line), cls ? '' : '\n');
  }
  return pre;
}

function renderReviews(reviews) {
  $('reviews-section').hidden = reviews.length === 0;
  $('reviews').replaceChildren(...reviews.map((r) => el('li', { class: 'review' },
    el('p', {}, el('strong', {}, r.summary)),
    el('p', { class: 'muted' }, 'asked by ', r.callerName || '(no name)', ' ', el('code', {}, r.caller), ` · ${r.tool} · expires `, when(r.expiresAt)),
    r.diff ? diffView(r.diff) : null,
    el('div', { class: 'row' },
      el('button', { class: 'primary', onclick: () => act(() => ask('reviews.decide', { review: r.id, approve: true }), 'Approved.') }, 'Approve'),
      el('button', { onclick: () => act(() => ask('reviews.decide', { review: r.id, approve: true, allowSession: true }), 'Approved; further writes on this connection will not ask.') }, 'Approve all from this session'),
      el('button', { class: 'danger', onclick: () => act(() => ask('reviews.decide', { review: r.id, approve: false }), 'Denied.') }, 'Deny')))));
}

// The local bridge is a caller without an extension id: its label names it, and its Disconnect
// closes the WebSocket with 4002 and forgets the user's authorization of its token.
const disconnect = (caller, kind) => (kind === 'bridge'
  ? act(() => ask('bridge.disconnect'), `Disconnected ${who(caller)}.`)
  : act(() => ask('sessions.disconnect', { id: caller }), `Disconnected ${who(caller)}.`));

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
      el('small', {}, ` · ${list.length}\u00a0connection${list.length > 1 ? 's' : ''} · since `, when(Math.min(...list.map((s) => s.openedAt))))),
    el('button', { class: 'danger', 'aria-label': `Disconnect ${names.get(caller) || caller}`,
      onclick: () => disconnect(caller, list[0].kind) }, 'Disconnect'))));
}

// A bridge link that ended or was refused says why (a refusing hello_ack's reason included).
function renderBridge({ bridge }) {
  $('bridge-status').replaceChildren(bridge.state !== 'connected' && bridge.error
    ? el('p', { class: 'notice', role: 'status' }, `Local bridge (port ${bridge.port}): ${bridge.state === 'retrying' ? 'reconnecting. ' : ''}`, bridge.error)
    : '');
}

function renderAudit() {
  const caller = $('f-caller').value;
  const result = $('f-result').value;
  const shown = entries.filter((e) => (!caller || e.caller === caller)
    && (!result || (result === 'ok' ? e.result === 'ok' : e.result !== 'ok')));
  const callers = [...new Set(entries.map((e) => e.caller))];
  const select = $('f-caller');
  const have = [...select.options].map((o) => o.value).filter(Boolean);
  if (have.join() !== callers.join()) {
    select.replaceChildren(el('option', { value: '' }, 'All'), ...callers.map((c) => el('option', { value: c }, who(c))));
    select.value = callers.includes(caller) ? caller : '';
  }
  $('audit').replaceChildren(...(shown.length ? shown.slice(0, 200).map((e) => el('li', {},
    el('span', { class: 'what' }, el('span', { class: e.result === 'ok' ? 'ok' : 'bad' }, e.result), ` ${e.tool}`,
      e.target ? el('small', {}, ` ${e.target.slice(0, 8)}`) : null, el('div', {}, el('small', {}, who(e.caller)))),
    el('small', {}, when(e.at))))
    : [el('li', { class: 'empty' }, entries.length ? 'No entry matches the filters.' : 'No write has been attempted yet.')]));
}

let last = '';
async function render(force = false) {
  const [state, audit] = await Promise.all([ask('state.get'), ask('audit.list')]);
  const key = JSON.stringify([state, audit.entries.length, audit.entries[0]]);
  if (!force && key === last) return;
  last = key;
  names = new Map(state.policy.allowlist.map((c) => [c.id, c.name]));
  entries = audit.entries;
  $('capability').replaceChildren(userScriptsNotice(state.capability) ?? '');
  const waiting = state.policy.pending.length;
  $('approvals').replaceChildren(waiting
    ? el('p', { class: 'notice', role: 'status' }, `${waiting} caller${waiting > 1 ? 's' : ''} waiting for approval. `,
      el('button', { onclick: () => chrome.runtime.openOptionsPage() }, 'Review in settings'))
    : '');
  renderReviews(state.reviews);
  renderSessions(state.sessions);
  renderBridge(await ask('bridge.status'));
  renderAudit();
}

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

keepFresh(() => render(false), 1000);
render(true).catch((e) => say(status, e.message, 'error'));
