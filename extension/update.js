// Script updates in the options page, only when the user asks: "Check for update" on a script
// whose metadata names @updateURL or @downloadURL, and "Check all for updates". The service
// worker fetches and judges (scripts.checkUpdate); a newer version is shown here — old → new
// version, what changes in where it runs and what it may use and reach (its text with invisible
// and direction characters marked by the worker), the hosts new files come from, their code, and
// the diff — before anything is stored. Update (scripts.update) stores exactly that version and
// those files, fetched again and refused if they differ, as your own write: a new revision in
// the history, undoable, audited as update_script.
import { ARM_MS, el, say, marked, diffView, fileHead, codeView } from './ui.js';

const $ = (id) => document.getElementById(id);
const status = () => $('status');

/** An internal operation; resolves to the whole answer, {ok: false, error, reason} included. */
async function askRaw(op, args = {}) {
  const reply = await chrome.runtime.sendMessage({ channel: 'lumo:internal', op, via: 'options page', ...args });
  return reply ?? { ok: false, error: 'no answer from the service worker' };
}
const changed = () => document.dispatchEvent(new CustomEvent('lumo:scripts-changed'));

/** Shows what a newer version would change; resolves to true when the user clicks Update.
 *  One review at a time: a check that answers while another review is open (two rows checked
 *  at once, or a check's button clicked while a "Review update" is open) waits for it to close,
 *  so the open dialog, and what its Update stores, never changes under the user's pointer. */
let reviewing = Promise.resolve();
function review(r) {
  const turn = reviewing.then(() => show(r));
  reviewing = turn.catch(() => {});
  return turn;
}

function show(r) {
  const dialog = $('update-review');
  $('update-review-title').textContent = `Update ${r.name}?`;
  $('update-review-versions').replaceChildren('Version ', ...marked(r.installed ?? '(none)'), ' → ', ...marked(r.offered),
    `. Nothing has been stored yet. Update stores this version as a new revision (your current one stays in its history); the script stays on or off as it is, and keeps its values.`);
  $('update-review-effects').replaceChildren(...r.effects.map((e) => el('li', {}, marked(e))));
  $('update-review-hosts').replaceChildren(...(r.hosts.length
    ? ['Its new @require/@resource files, below, were fetched for this check (without your cookies) from: ', ...r.hosts.flatMap((h, i) => [i ? ', ' : '', ...marked(h)]), '. Update fetches them again and stores them only if each is the same, byte for byte and read the same way; else it stores nothing.']
    : []));
  // Shown whole: the worker offers no update whose files it cannot show whole.
  $('update-review-files').replaceChildren(...(r.files ?? []).map((f) => el('div', { class: 'file' }, ...fileHead(f),
    f.text == null ? null : codeView(f))));
  $('update-review-from').replaceChildren('From ', ...marked(r.downloadUrl), r.checkUrl !== r.downloadUrl ? ` (checked at ${r.checkUrl})` : '');
  $('update-review-diff').replaceChildren(diffView(r.diff, `Changes from version ${r.installed ?? '(none)'} to ${r.offered}`));
  const ok = $('update-review-ok');
  // It appears under the pointer: no click for a moment, or the click on "Check for update"
  // could confirm what it has not shown yet.
  ok.disabled = true;
  setTimeout(() => { ok.disabled = false; }, ARM_MS);
  return new Promise((resolve) => {
    const done = (yes) => {
      ok.onclick = null;
      $('update-review-cancel').onclick = null;
      dialog.onclose = null;
      // The next review's turn comes after this close's event, which would otherwise close it.
      if (dialog.open) {
        dialog.addEventListener('close', () => resolve(yes), { once: true });
        dialog.close();
      } else resolve(yes);
    };
    ok.onclick = () => done(true);
    $('update-review-cancel').onclick = () => done(false);
    dialog.onclose = () => done(false);
    dialog.showModal();
    $('update-review-cancel').focus();
  });
}

/** Reviews a check's newer version and, if the user confirms, stores it; whether it did. */
async function offer(r) {
  if (!(await review(r))) { say(status(), `Not updated: ${r.name} is unchanged.`); return false; }
  // The files shown go back by their id (bytes, type, charset): Update refuses any other.
  const u = await askRaw('scripts.update', { uuid: r.uuid, revision: r.revision, sha256: r.sha256, files: (r.files ?? []).map((f) => f.id) });
  if (u.ok) say(status(), `Updated ${r.name} to version ${r.offered} (revision ${u.result.script.revision}).`);
  // Changed since the check (an edit, an agent's write, a restore): the store's words are for
  // agents ("read it again with get_script"); the user checks again.
  else if (u.code === 'CONFLICT' && u.details?.currentRevision) {
    say(status(), `Not updated: ${r.name} changed since the check (it is now at revision ${u.details.currentRevision}); check for the update again to review it against the current version.`, 'error');
  } else say(status(), `Not updated: ${u.error}`, 'error');
  changed();
  return u.ok;
}

/** Runs `fn` for a script unless its check or review is in progress: a second click (a double
 *  click on Check for update, Review update while its review waits) adds no second review of
 *  the same version, whose Update could only be refused once the first one stored it. */
const inProgress = new Set();
async function once(uuid, fn) {
  if (inProgress.has(uuid)) return;
  inProgress.add(uuid);
  try { await fn(); } finally { inProgress.delete(uuid); }
}

document.addEventListener('lumo:check-update', (e) => {
  const { uuid, name } = e.detail;
  return once(uuid, async () => {
    say(status(), `Checking ${name} for an update…`);
    const r = await askRaw('scripts.checkUpdate', { uuid });
    if (!r.ok) { say(status(), `${name}: ${r.error}`, 'error'); return; }
    if (!r.update) { say(status(), `${name}: ${r.message}`); return; }
    say(status(), `${name}: version ${r.offered} is available.`);
    await offer(r);
  });
});

/** Checks running at once: each waits on a server (up to its timeout), so one at a time made
 *  "Check all" take minutes for a few dozen scripts; a few at a time, not every server at once. */
const CHECKS_AT_ONCE = 4;

// A few at a time; the rows stay in the list's order, each shown when its check answered.
$('check-all').addEventListener('click', async () => {
  const button = $('check-all');
  const results = $('update-results');
  button.disabled = true;
  try {
    const list = await askRaw('scripts.list');
    if (!list.ok) { say(status(), list.error, 'error'); return; }
    const candidates = list.scripts.filter((s) => typeof s.updateUrl === 'string');
    results.replaceChildren();
    if (!candidates.length) { say(status(), 'No script names an @updateURL or @downloadURL.'); return; }
    const rows = candidates.map((s) => el('li', { 'data-uuid': s.uuid, hidden: true }, el('strong', {}, s.name), ': '));
    results.replaceChildren(...rows);
    let found = 0;
    let failed = 0;
    let next = 0;
    let done = 0;
    const progress = () => say(status(), `Checking for updates: ${done} of ${candidates.length} done…`);
    const checker = async () => {
      while (next < candidates.length) {
        const i = next++;
        const [s, li] = [candidates[i], rows[i]];
        // Without the new files: they are fetched when the user opens that update's review.
        const r = await askRaw('scripts.checkUpdate', { uuid: s.uuid, files: false }).catch((e) => ({ ok: false, error: String(e?.message ?? e) }));
        if (!r.ok) { failed++; li.append(el('span', { class: 'bad' }, r.error)); }
        else if (!r.update) li.append(r.message);
        else {
          found++;
          li.append('version ', ...marked(r.installed ?? '(none)'), ' → ', ...marked(r.offered), ' is available. ',
            el('button', { class: 'primary', 'aria-label': `Review the update of ${s.name}`, onclick: () => once(s.uuid, async () => {
              // Checked again, with its new files, which the review shows.
              say(status(), `Checking ${s.name} for an update…`);
              const full = await askRaw('scripts.checkUpdate', { uuid: s.uuid });
              if (!full.ok) { say(status(), `${s.name}: ${full.error}`, 'error'); return; }
              if (!full.update) { say(status(), `${s.name}: ${full.message}`); return; }
              // Installed: the row no longer offers what is now the script's own version.
              if (await offer(full)) li.replaceChildren(el('strong', {}, s.name), ': updated to version ', ...marked(full.offered), '.');
            }) }, 'Review update'));
        }
        li.hidden = false;
        done++;
        progress();
      }
    };
    progress();
    await Promise.all(Array.from({ length: Math.min(CHECKS_AT_ONCE, candidates.length) }, checker));
    say(status(), `Checked ${candidates.length} script(s): ${found} update(s) available${failed ? `, ${failed} could not be checked` : ''}.`, failed ? 'error' : 'info');
  } finally {
    button.disabled = false;
  }
});
