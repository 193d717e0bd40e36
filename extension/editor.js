// The user's own hands in the options page: the script editor, a script's history (diff and
// "Restore this version"), the trash, and import/export. Every change goes to the service worker
// (scripts.save, scripts.restore, trash.purge), which runs it through the same store, validation,
// locking and history as the agent's writes, attributed to "you".
import { ARM_MS, el, when, say, marked, ruleLines, diffView, reveal } from './ui.js';
import { createEditor } from './codemirror.js';

const $ = (id) => document.getElementById(id);
const status = () => $('status');

/** An internal operation; resolves to the whole answer, {ok: false, error, code, details} included. */
async function askRaw(op, args = {}) {
  const reply = await chrome.runtime.sendMessage({ channel: 'lumo:internal', op, via: 'options page', ...args });
  return reply ?? { ok: false, error: 'no answer from the service worker' };
}
async function ask(op, args) {
  const r = await askRaw(op, args);
  if (r.ok !== true) throw Object.assign(new Error(r.error), { reply: r });
  return r;
}
const changed = () => document.dispatchEvent(new CustomEvent('lumo:scripts-changed'));
const who = (by) => (by === 'user' ? 'you' : by);

/** Largest source the provider stores (tools/catalog.rs MAX_SOURCE_BYTES). */
const MAX_SOURCE_BYTES = 256 * 1024;
/** Largest backup file read; refused before it is read. */
const MAX_BACKUP_BYTES = 20 * 1024 * 1024;

// ---------------------------------------------------------------- editor

// `saved`: the text as last loaded or saved (CodeMirror's, line breaks as \n), to tell unsaved
// edits; `crlf`: the script's every line break was \r\n, and a save keeps them so.
const editor = { uuid: null, revision: null, name: null, saved: null, crlf: false };
const diags = $('editor-diagnostics');
const code = createEditor($('editor-text'), {
  label: 'Script source', describedBy: 'editor-help', onChange: () => lintSoon(), onSave: () => save(),
});

/** Metadata problems: marked at their line in the editor (gutter and underline) and listed below it. */
function renderDiagnostics(list) {
  code.setProblems(list);
  diags.replaceChildren(...list.map((d) => el('li', { class: d.severity },
    el('button', { class: 'link', onclick: () => code.goToLine(d.line), 'aria-label': `Go to line ${d.line}` }, `line ${d.line}`),
    ` ${d.severity}: ${d.message}`)));
}

let lintTimer = 0;
function lintSoon() {
  clearTimeout(lintTimer);
  lintTimer = setTimeout(async () => {
    const r = await askRaw('scripts.lint', { source: code.text });
    if (r.ok) renderDiagnostics(r.diagnostics);
  }, 250);
}

const dirty = () => !$('editor-section').hidden && editor.saved !== null && code.text !== editor.saved;

/** Unsaved text is dropped only on the user's word, as Tampermonkey and Violentmonkey ask too. */
function mayDiscard() {
  return !dirty() || window.confirm(`Discard your unsaved changes${editor.name ? ` to ${editor.name}` : ' to the new script'}?`);
}
window.addEventListener('beforeunload', (e) => { if (dirty()) e.preventDefault(); });

/** Whether every line break of `text` is \r\n (and there is one). */
const allCrlf = (text) => text.includes('\r\n') && !/\r(?!\n)|(?<!\r)\n/.test(text);

export function openEditor(script) {
  if (!mayDiscard()) return;
  editor.uuid = script?.uuid ?? null;
  editor.revision = script?.revision ?? null;
  editor.name = script?.name ?? null;
  $('editor-title').textContent = script ? `Edit ${script.name} (revision ${script.revision})` : 'New script';
  const source = script?.source ?? '// ==UserScript==\n// @name        New script\n// @namespace   mine\n// @match       https://example.com/*\n// ==/UserScript==\n\n';
  code.text = source;
  editor.saved = code.text;
  editor.crlf = allCrlf(source);
  $('editor-section').hidden = false;
  lintSoon();
  // Into view from wherever it was opened (the list may be screens long); the focus goes to the text.
  $('editor-section').scrollIntoView({ block: 'start' });
  code.focus();
}

// One save at a time: a second click (or Ctrl+S) while one is on its way would carry the
// revision the first replaces, and be refused as a conflict with the user's own save. Asked
// again meanwhile, it saves once more after, if the text changed since.
let saving = null;
let again = false;
let savedAt = 0;
function save() {
  if (saving) { again = true; return saving; }
  // The second click of a double click, after a quick save: the status already says "Saved",
  // not to be replaced by "Nothing to save".
  if (!dirty() && Date.now() - savedAt < ARM_MS) return Promise.resolve();
  $('editor-save').disabled = true;
  saving = saveNow().finally(() => {
    saving = null;
    savedAt = Date.now();
    $('editor-save').disabled = false;
    if (again) { again = false; if (dirty()) save(); }
  });
  return saving;
}

async function saveNow() {
  const text = code.text;
  // The editor holds \n line breaks: a script written with \r\n is saved with them again, so an
  // unchanged one stores nothing, and an edited one differs by the edit alone.
  const args = { source: editor.crlf ? text.replace(/\n/g, '\r\n') : text };
  if (editor.uuid) Object.assign(args, { uuid: editor.uuid, revision: editor.revision });
  const r = await askRaw('scripts.save', args);
  if (r.ok) {
    const s = r.result.script;
    // The same text saved again stores no revision.
    const same = editor.uuid === s.uuid && editor.revision === s.revision;
    editor.uuid = s.uuid;
    editor.revision = s.revision;
    editor.name = s.name;
    editor.saved = text;
    $('editor-title').textContent = `Edit ${s.name} (revision ${s.revision})`;
    renderDiagnostics(r.result.diagnostics ?? []);
    say(status(), same ? `Nothing to save: ${s.name} is already this text (revision ${s.revision}).` : `Saved ${s.name} (revision ${s.revision}).`);
    changed();
  } else {
    if (r.details?.diagnostics) renderDiagnostics(r.details.diagnostics);
    // The worker words it for the page (by_hand::in_page_words).
    say(status(), `Not saved: ${r.error}`, 'error');
  }
}

$('editor-save').addEventListener('click', save);
$('editor-new').addEventListener('click', () => openEditor(null));
$('editor-close').addEventListener('click', () => { if (mayDiscard()) $('editor-section').hidden = true; });

document.addEventListener('lumo:edit', async (e) => {
  try {
    const { script } = await ask('scripts.get', { uuid: e.detail.uuid });
    openEditor(script);
  } catch (err) {
    say(status(), err.message, 'error');
  }
});

// ---------------------------------------------------------------- history

export async function openHistory(uuid) {
  const box = $('history');
  $('history-section').hidden = false;
  let h;
  try {
    h = await ask('scripts.revisions', { uuid });
  } catch (e) {
    box.replaceChildren(el('p', { class: 'notice' }, e.message));
    return;
  }
  $('history-title').textContent = `History of ${h.name}${h.deleted ? ' (in the trash)' : ''}`;
  const shown = el('div', { id: 'history-diff' });
  const rows = h.revisions.map((r) => el('tr', {},
    el('td', {}, `revision ${r.revision}`, r.current ? el('small', {}, ' (current)') : null),
    el('td', {}, who(r.by), r.via ? el('small', {}, ` via ${r.via}`) : null),
    el('td', {}, when(r.at)),
    el('td', {}, `${r.size} bytes`, r.enabled ? '' : el('small', {}, ' disabled')),
    el('td', { class: 'actions' }, r.current ? null : [
      el('button', { 'aria-label': `Show changes of revision ${r.revision}`, onclick: async () => {
        const v = await ask('scripts.revision', { uuid, revision: r.revision });
        shown.replaceChildren(el('h3', {}, `Revision ${r.revision} compared with the current one`), diffView(v.diff));
      } }, 'Diff'), ' ',
      el('button', { class: 'primary', 'aria-label': `Restore revision ${r.revision}`, onclick: async () => {
        const res = await askRaw('scripts.restore', { uuid, revision: r.revision, currentRevision: h.currentRevision, live: !h.deleted });
        if (res.ok) say(status(), `Restored revision ${r.revision} of ${h.name}.`);
        else say(status(), `Not restored: ${res.error}`, 'error');
        changed();
        openHistory(uuid);
      } }, 'Restore this version')])));
  box.replaceChildren(
    el('table', {}, el('thead', {}, el('tr', {}, ['Revision', 'By', 'When', 'Size', ''].map((x) => el('th', { scope: 'col' }, x)))), el('tbody', {}, rows)),
    ...(h.problems.length ? [el('p', { class: 'notice' }, `Some history could not be read and was skipped: ${h.problems.join('; ')}`)] : []),
    shown);
}

/** History opened by a click (a script's row or the trash's): shown, then brought into view. */
async function showHistory(uuid) {
  await openHistory(uuid);
  reveal($('history-section'));
}

document.addEventListener('lumo:history', (e) => showHistory(e.detail.uuid));
$('history-close').addEventListener('click', () => { $('history-section').hidden = true; });

// ---------------------------------------------------------------- trash

// What the trash list shows: "Empty trash" purges these, not a script deleted since.
let listedTrash = [];

export async function renderTrash() {
  const r = await askRaw('trash.list');
  const box = $('trash');
  listedTrash = r.ok ? r.scripts.map((s) => s.uuid) : [];
  // Nothing listed, nothing to empty: the button says so instead of doing nothing on a click.
  $('trash-empty').disabled = !listedTrash.length;
  if (!r.ok) { box.replaceChildren(el('p', { class: 'notice' }, r.error)); return; }
  // What could not be read or deleted for good now, said above the list.
  const problems = (r.problems ?? []).map((p) => el('p', { class: 'notice' }, p.uuid ? `${p.uuid}: ${p.message}` : p.message));
  if (!r.scripts.length) { box.replaceChildren(...problems, el('p', { class: 'empty' }, 'The trash is empty.')); return; }
  box.replaceChildren(...problems, el('table', {},
    el('thead', {}, el('tr', {}, ['Script', 'Deleted', 'Kept until', ''].map((x) => el('th', { scope: 'col' }, x)))),
    el('tbody', {}, r.scripts.map((s) => el('tr', { 'data-uuid': s.uuid },
      el('td', {}, el('strong', {}, s.name), el('div', { class: 'muted' }, s.namespace ?? '')),
      el('td', {}, 'by ', who(s.deletedBy), ' ', when(s.deletedAt)),
      el('td', {}, when(s.purgeAt)),
      el('td', { class: 'actions' },
        el('button', { class: 'primary', 'aria-label': `Restore ${s.name}`, onclick: async () => {
          const res = await askRaw('scripts.restore', { uuid: s.uuid, revision: s.revision, currentRevision: s.revision });
          say(status(), res.ok ? `Restored ${s.name}.` : `Not restored: ${res.error}`, res.ok ? 'info' : 'error');
          changed();
        } }, 'Restore'), ' ',
        el('button', { 'aria-label': `History of ${s.name}`, onclick: () => showHistory(s.uuid) }, 'History'), ' ',
        el('button', { class: 'danger', 'aria-label': `Delete ${s.name} forever`, onclick: async () => {
          if (!confirm(`Delete ${s.name} forever? Its history goes too; this cannot be undone.`)) return;
          const res = await askRaw('trash.purge', { uuids: [s.uuid] });
          say(status(), res.ok ? `Deleted ${s.name} forever.` : res.error, res.ok ? 'info' : 'error');
          changed();
        } }, 'Delete forever')))))));
}

$('trash-empty').addEventListener('click', async () => {
  // Taken before the dialog: what the user saw is what goes.
  const listed = [...listedTrash];
  const n = listed.length;
  if (!n) return;
  if (!confirm(`Empty the trash? The ${n} script${n > 1 ? 's' : ''} listed in it, and ${n > 1 ? 'their' : 'its'} history, ${n > 1 ? 'are' : 'is'} deleted for good.`)) return;
  const res = await askRaw('trash.purge', { listed });
  // A script restored (or purged) while the dialog was open is not counted: say so.
  const gone = res.ok && res.purged < n ? ` ${n - res.purged} of the ${n} listed had left the trash meanwhile.` : '';
  say(status(), res.ok ? `Deleted ${res.purged} script(s) forever.${gone}` : res.error, res.ok ? 'info' : 'error');
  changed();
});
document.addEventListener('lumo:scripts-changed', () => renderTrash());

// ---------------------------------------------------------------- import / export

/** Sends an import (scripts.import or backup.restore) in two steps. The first asks the worker
 *  what it would store, which fetches and stores nothing; the user reads that (each script, what
 *  it replaces, where it runs, what it may reach, the files it would fetch) and confirms, saying
 *  for each stored script it would replace whether to replace it. Only the confirmed call
 *  fetches and stores, all or none. Cancelled: {ok: false, cancelled: true}. */
async function importConfirmed(op, args, verb) {
  const shown = await askRaw(op, args);
  if (!shown.ok) return shown;
  const answers = await reviewImport(shown.preview, verb);
  if (!answers) return { ok: false, cancelled: true, error: 'cancelled' };
  // Fetching a slow server's files takes up to 30 s: said, and no second import meanwhile
  // (R17: the page showed nothing for 20 s, and its file inputs stayed live).
  const files = shown.preview.files ?? 0;
  const doing = verb === 'Import' ? 'Importing' : 'Restoring';
  say(status(), files ? `${doing}: fetching ${files} @require/@resource file${files === 1 ? '' : 's'} (at most 30 s)…` : `${doing}…`);
  busy(true);
  try {
    return await askRaw(op, { ...args, ...answers, confirmed: true });
  } finally {
    busy(false);
  }
}

/** While an import or a restore is stored, its file inputs and the drop area take nothing. */
function busy(on) {
  for (const id of ['import-files', 'restore-file']) $(id).disabled = on;
  $('import-drop').classList.toggle('busy', on);
  $('import-drop').setAttribute('aria-busy', String(on));
}

/** A zip archive (another manager's backup, Violentmonkey's or Tampermonkey's): its first bytes. */
async function isZip(file) {
  const head = new Uint8Array(await file.slice(0, 4).arrayBuffer());
  return head.length === 4 && head[0] === 0x50 && head[1] === 0x4b && head[2] === 0x03 && head[3] === 0x04;
}
const ZIP_REFUSED = 'a .zip archive (another manager\'s backup?), which is not read: unzip it and import the .user.js files inside';

/** Shows what an import would store (the worker's preview: its text from the file comes with
 *  invisible and direction characters marked, bounded) and resolves to the user's answers
 *  ({replace, keep}: uuids of the stored scripts it would replace), or null if cancelled. */
function reviewImport(preview, verb) {
  const dialog = $('import-review');
  const n = preview.scripts.length;
  $('import-review-title').textContent = `${verb} ${n} script${n === 1 ? '' : 's'}?`;
  const hosts = [...preview.hosts, ...(preview.moreHosts ? [`${preview.moreHosts} more`] : [])];
  $('import-review-fetch').replaceChildren(...(preview.files
    ? [`Nothing has been fetched or stored yet. ${verb} fetches ${preview.files} @require/@resource file${preview.files === 1 ? '' : 's'} (without your cookies) from: `,
      ...hosts.flatMap((h, i) => [i ? ', ' : '', ...marked(h)]), '.']
    : ['Nothing has been stored yet, and these scripts name no file to fetch.']));
  const choices = [];
  const list = (title, items) => (items.length
    ? [el('div', {}, title), el('ul', { class: 'rules mono' }, items.map((r) => el('li', {}, marked(r))))]
    : []);
  $('import-review-list').replaceChildren(...preview.scripts.map((s) => {
    const rules = ruleLines(s);
    const asks = [...s.grants.filter((g) => g !== 'none').map((g) => `@grant ${g}`), ...s.connects.map((c) => `@connect ${c}`)];
    let replaces = el('div', {}, 'A new script.');
    if (s.replaces) {
      const box = el('input', { type: 'checkbox', checked: true });
      choices.push([s.replaces.uuid, box]);
      const ns = s.replaces.namespace ? ` (@namespace ${s.replaces.namespace})` : '';
      replaces = el('label', {}, box, ` Replace your script ${s.replaces.name}${ns}: its current version stays in its history. Unticked, your script is kept and this one skipped.`);
    }
    return el('li', {},
      el('div', {}, el('strong', {}, s.name), s.version ? el('small', {}, ' v', marked(s.version)) : null,
        el('span', { class: 'muted' }, ' from ', marked(s.label))),
      s.namespace ? el('div', { class: 'muted' }, s.namespace) : null,
      replaces,
      switchLine(s),
      s.values == null || (s.values === 0 && !s.dropsValues) ? null : el('div', {}, `Restores ${s.values} GM value(s)`
        + (s.dropsValues ? `, in place of your script's ${s.dropsValues} current GM value(s), which are not kept (untick Replace to keep them).` : '.')),
      rules.length ? list('Runs on:', rules) : el('div', {}, 'Runs nowhere.'),
      list('May use and reach:', asks),
      list('Fetches now:', s.fetch),
      // What the editor would warn of: a line other managers read otherwise, a request grant
      // without @connect… Seen before it is stored, not after.
      s.warnings.length ? [el('div', {}, 'Warnings:'), el('ul', { class: 'warnings' }, s.warnings.map((w) => el('li', {}, marked(w))),
        s.moreWarnings ? el('li', { class: 'muted' }, `… and ${s.moreWarnings} more; open it in the editor to see them all.`) : null)] : null,
      s.hidden ? el('div', { class: 'muted' }, `… and ${s.hidden} more line(s) of its metadata, not shown here.`) : null);
  }));
  const ok = $('import-review-ok');
  ok.textContent = verb;
  // It appears under the pointer: no click for a moment, or the click that chose the file
  // could confirm what it has not shown yet.
  ok.disabled = true;
  setTimeout(() => { ok.disabled = false; }, ARM_MS);
  return new Promise((resolve) => {
    const done = (answers) => {
      ok.onclick = null;
      $('import-review-cancel').onclick = null;
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answers);
    };
    ok.onclick = () => done({
      replace: choices.filter(([, b]) => b.checked).map(([u]) => u),
      keep: choices.filter(([, b]) => !b.checked).map(([u]) => u),
    });
    $('import-review-cancel').onclick = () => done(null);
    // A close event of the dialog's previous showing can arrive after this one opened it.
    dialog.onclose = () => { if (!dialog.open) done(null); };
    dialog.showModal();
    $('import-review-cancel').focus();
  });
}

/** What an imported script's switch will be, said where it differs from the script it
 *  replaces: a backup restores its own on/off, which can switch on a script you turned off. */
function switchLine(s) {
  const was = s.replaces?.enabled;
  if (was === false && s.enabled) return el('div', { class: 'notice' }, 'Switches your script on: it is off now, and runs again once replaced.');
  if (was === true && !s.enabled) return el('div', {}, 'Switches your script off: it stops running once replaced.');
  return s.enabled ? null : el('div', {}, 'Stored switched off: it runs only once you turn it on.');
}

function importReport(r) {
  if (r.cancelled) return ['Import cancelled: nothing was imported.'];
  if (!r.ok) return [`Nothing imported: ${r.error}`];
  const lines = [
    ...r.imported.map((s) => (s.unchanged ? `${s.label}: ${s.name} is already this version (no new revision)`
      : `${s.label}: ${s.replaced ? 'replaced' : 'imported'} as ${s.name}`)),
    ...r.kept.map((k) => `${k}: skipped (kept the existing script)`),
  ];
  return lines.length ? lines : ['Nothing to import.'];
}

/** One line per file under the import box, kept until the next import; the status above the
 *  page says one line (a screen of files there would push the page down, then fade). */
function showImport(lines, { refused, r }) {
  const error = refused.length > 0 || (!r.ok && !r.cancelled);
  const list = $('import-results');
  if (lines.length === 1) {
    list.replaceChildren();
    say(status(), lines[0], error ? 'error' : 'info');
    return;
  }
  list.replaceChildren(...lines.map((l) => el('li', {}, l)));
  const count = (n, what) => (n ? [`${n} ${what}`] : []);
  const imported = r.ok ? r.imported ?? [] : [];
  const summary = r.cancelled ? 'Import cancelled: nothing was imported'
    : !r.ok ? 'Nothing imported'
      : [...count(imported.filter((x) => !x.replaced).length, 'imported'), ...count(imported.filter((x) => x.replaced && !x.unchanged).length, 'replaced'),
        ...count(imported.filter((x) => x.unchanged).length, 'already that version'),
        ...count(r.kept?.length ?? 0, 'kept as they were')].join(', ') || 'Nothing imported';
  say(status(), `${summary}${refused.length ? `; ${refused.length} refused` : ''}. Each file is listed under the import box.`, error ? 'error' : 'info');
}

/** A file's text, or null when it is not UTF-8: decoded with replacement characters, it would
 *  be stored other than it is (an update refuses such a file too). */
async function utf8(file) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(await file.arrayBuffer());
  } catch {
    return null;
  }
}

/** Imports .user.js files in one step: each file's size is checked before it is read. */
export async function importFiles(files) {
  const refused = [];
  const read = [];
  for (const f of files) {
    if (f.size > MAX_SOURCE_BYTES) { refused.push(`${f.name}: refused, ${f.size} bytes is over the ${MAX_SOURCE_BYTES}-byte limit (not read)`); continue; }
    if (await isZip(f)) { refused.push(`${f.name}: refused, ${ZIP_REFUSED}`); continue; }
    const source = await utf8(f);
    if (source === null) { refused.push(`${f.name}: refused, not UTF-8 text (imported, its bytes would be stored changed)`); continue; }
    if (!/==UserScript==/.test(source)) { refused.push(`${f.name}: refused, not a userscript (no // ==UserScript== block)`); continue; }
    read.push({ name: f.name, source });
  }
  const r = read.length ? await importConfirmed('scripts.import', { files: read }, 'Import') : { ok: true, imported: [], kept: [] };
  const report = read.length ? [...refused, ...importReport(r)] : refused;
  showImport(report.length ? report : ['Nothing to import.'], { refused, r });
  changed();
  return report;
}

/** The backup of every script (built by the worker); with their GM values only when asked:
 *  values can hold what a script keeps private (logins, tokens), so they stay out by default. */
export async function exportAll({ values = false } = {}) {
  const { backup, problems } = await ask('backup.export', { values });
  return { backup, problems: problems ?? [] };
}

/** Restores a backup: the worker parses and checks it, the user confirms what it would store,
 *  then the worker stores every script or none. Resolves to null when the user cancels. */
export async function restoreBackup(file) {
  if (file.size > MAX_BACKUP_BYTES) throw new Error(`the file is ${file.size} bytes, over the ${MAX_BACKUP_BYTES}-byte limit for a backup (not read)`);
  if (await isZip(file)) throw new Error(`the file is ${ZIP_REFUSED} (a backup from this extension is a .json file)`);
  const text = await utf8(file);
  if (text === null) throw new Error('the file is not UTF-8 text, as a backup from this extension is');
  const r = await importConfirmed('backup.restore', { text }, 'Restore');
  if (r.cancelled) return null;
  changed();
  if (!r.ok) throw new Error(r.error);
  return r.imported;
}

$('import-files').addEventListener('change', (e) => { importFiles([...e.target.files]); e.target.value = ''; });
const drop = $('import-drop');
drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('over');
  if (!drop.classList.contains('busy')) importFiles([...e.dataTransfer.files]);
});
$('export-all').addEventListener('click', async () => {
  try {
    const values = $('export-values').checked;
    const { backup, problems } = await exportAll({ values });
    const url = URL.createObjectURL(new Blob([JSON.stringify(backup, null, 2)], { type: 'application/json' }));
    const a = el('a', { href: url, download: `lumo-userscripts-${new Date(backup.exportedAt).toISOString().slice(0, 10)}.json` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    const missing = problems.map((p) => `${p.uuid} (${p.message})`);
    say(status(), `Exported ${backup.scripts.length} script(s)${values ? ' with their values' : ''}.`
      + (missing.length ? ` Not in the file, as their stored records cannot be read: ${missing.join('; ')}.` : ''),
      missing.length ? 'error' : 'info');
  } catch (e) {
    say(status(), e.message, 'error');
  }
});
$('restore-file').addEventListener('change', async (e) => {
  const [file] = e.target.files;
  e.target.value = '';
  if (!file) return;
  try {
    const done = await restoreBackup(file);
    if (!done) { say(status(), 'Restore cancelled: nothing was restored.'); return; }
    const values = done.reduce((n, s) => n + (s.values ?? 0), 0);
    say(status(), `Restored ${done.length} script(s) from the backup${values ? `, with ${values} value(s)` : ''}.`);
  } catch (err) {
    say(status(), `Backup not restored: ${err.message}`, 'error');
  }
});

renderTrash();
chrome.storage.onChanged.addListener((changes, area) => {
  if (area === 'local' && Object.keys(changes).some((k) => k === 'trash/index')) renderTrash();
});
