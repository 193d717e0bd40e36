// Shared helpers for the options page and the popup. The pages own no state: they ask the
// service worker (the single owner) over internal messages and render what it returns.
// Everything that comes from a caller (names, ids, script text) is rendered with textContent.

export const CHANNEL = 'lumo:internal';

/** How long a button that appeared or moved under the pointer takes no click. */
export const ARM_MS = 800;

/** One internal operation; resolves to the service worker's answer, throws its error. */
export async function ask(op, args = {}) {
  const reply = await chrome.runtime.sendMessage({ channel: CHANNEL, op, ...args });
  if (!reply || reply.ok !== true) throw new Error(reply?.error ?? 'no answer from the service worker');
  return reply;
}

/** Builds an element. Strings and numbers become text nodes: never parsed as HTML. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'class') node.className = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function relTime(ms, now = Date.now()) {
  if (typeof ms !== 'number') return 'never';
  const s = Math.round((now - ms) / 1000);
  if (s < 0) return 'in ' + relTime(now, now - s * 1000).replace(' ago', '');
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export function absTime(ms) {
  return typeof ms === 'number' ? new Date(ms).toLocaleString() : '';
}

/** A relative time that keeps itself current (see the ticker below); the exact time on hover. */
export function when(ms) {
  const t = el('time', { 'data-at': typeof ms === 'number' ? ms : undefined, datetime: typeof ms === 'number' ? new Date(ms).toISOString() : undefined, title: absTime(ms) }, relTime(ms));
  if (typeof ms === 'number') onScreen.observe(t);
  return t;
}

// Relative times are refreshed in place, so the pages need not be rebuilt (which would move
// keyboard focus) just because time passed; and only those on screen, so 2,000 of them in the
// options page cost nothing while idle. One that scrolls into view is brought up to date then.
const visibleTimes = new Set();
const refreshTime = (t) => {
  const text = relTime(Number(t.dataset.at));
  if (t.textContent !== text) t.textContent = text;
};
const onScreen = new IntersectionObserver((seen) => {
  for (const e of seen) {
    if (e.isIntersecting && e.target.isConnected) {
      visibleTimes.add(e.target);
      refreshTime(e.target);
    } else {
      visibleTimes.delete(e.target);
      if (!e.target.isConnected) onScreen.unobserve(e.target);
    }
  }
});
setInterval(() => {
  for (const t of visibleTimes) {
    if (t.isConnected) refreshTime(t);
    else { visibleTimes.delete(t); onScreen.unobserve(t); }
  }
}, 1000);

/** Brings a section just opened by a button into view, and the keyboard focus into it (its
 *  heading unless `focusTarget` is given): it opens below the list, which may be screens long,
 *  and a click that changes nothing in view reads as a click that did nothing. */
export function reveal(section, focusTarget = null) {
  section.scrollIntoView({ block: 'start' });
  const target = focusTarget ?? section.querySelector('h2');
  if (!target) return;
  if (!focusTarget) target.tabIndex = -1;
  target.focus({ preventScroll: true });
}

/** Shows a message in a live region. */
export function say(region, text, kind = 'info') {
  region.textContent = text;
  region.dataset.kind = kind;
  // Confirmations fade after a while; errors stay until the next action.
  clearTimeout(region._clear);
  if (kind !== 'error') region._clear = setTimeout(() => { if (region.textContent === text) region.textContent = ''; }, 8000);
}

/** Calls `fn(keys, area)` (debounced, with every key changed meanwhile) when stored state
 *  changes. Pages refresh from this instead of polling what storage holds. */
export function onStored(fn, delayMs = 50) {
  let keys = new Set();
  let timer = null;
  chrome.storage.onChanged.addListener((changes, area) => {
    for (const k of Object.keys(changes)) keys.add(`${area}:${k}`);
    if (timer) return;
    timer = setTimeout(() => {
      const batch = keys;
      keys = new Set();
      timer = null;
      Promise.resolve(fn(batch)).catch(() => {});
    }, delayMs);
  });
}

/** `fn` made to run one at a time: a call while it runs asks for one more run after it, so an
 *  older answer can never be rendered after a newer one. */
export function oneAtATime(fn) {
  let running = null;
  let again = false;
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await fn();
        } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
}

// Invisible and direction characters reach the pages only as ⟨U+XXXX⟩ markers (the service
// worker escapes them, and escapes "⟨" itself, so text can never pose as a marker). Markers are
// drawn as marks, so they stand out from the code around them.
const MARKER = /(\u27e8U\+[0-9A-F]{4,6}\u27e9)/;

/** Text with its ⟨U+XXXX⟩ markers highlighted, as nodes. */
export function marked(text) {
  return String(text).split(MARKER).filter((part) => part !== '').map((part) => (MARKER.test(part)
    ? el('mark', { class: 'invisible', title: `An invisible or direction character (${part.slice(1, -1)}) is here` }, part)
    : document.createTextNode(part)));
}

/** Where a script runs, as its metadata lines (the rules Chrome is given), then when in the
 *  page's load it runs (unless at idle, the default) and whether frames are left out, which
 *  Chrome is given too (`runAt`, `allFrames`). With no rule it runs nowhere: no line at all.
 *  The options page's list and the import's confirmation both show a script this way. */
export function ruleLines(s) {
  const where = [
    ...s.matches.map((m) => `@match ${m}`), ...s.includeGlobs.map((m) => `@include ${m}`),
    ...s.excludeMatches.map((m) => `@exclude-match ${m}`), ...s.excludeGlobs.map((m) => `@exclude ${m}`),
  ];
  const how = [
    ...(s.runAt && s.runAt !== 'document_idle' ? [`@run-at ${s.runAt.replace('_', '-')}`] : []),
    ...(s.noframes ? ['@noframes (top frame only)'] : []),
  ];
  return where.length ? [...where, ...how] : [];
}

/** A diff as the worker sends it (`guard::diff::line_diff`: its lines already shown with their
 *  invisible characters marked), one element per line, added and removed lines coloured. The
 *  options page's History and the update's review show it. */
export function diffView(text, label = 'Changes from the current version') {
  return el('pre', { class: 'diff', 'aria-label': label },
    text.split('\n').map((l) => el('div', { class: l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : '' }, l || ' ')));
}

/** A new @require/@resource file as a review shows it (fetched for the review, and the write
 *  stores exactly these bytes): its label, URL, size and sha256, and a note on how it is read. */
export function fileHead(f) {
  const size = f.size < 1024 ? `${f.size} bytes` : `${(f.size / 1024).toFixed(1)} KiB`;
  const head = el('p', {}, el('strong', {}, marked(f.label)), ' ', el('code', {}, marked(f.url)),
    f.finalUrl ? [' (from ', el('code', {}, marked(f.finalUrl)), ')'] : '',
    el('small', { class: 'block muted' }, `${size} · sha256 `, el('code', { title: f.sha256 }, f.sha256.slice(0, 16)), '…'));
  return [head, f.note ? el('p', { class: 'notice', role: 'note' }, marked(f.note)) : null];
}

/** A file's lines, all new to the script (no +/- column: nothing is taken away), marked. One
 *  node appended at a time: spread as arguments, 130,000 lines overflowed the stack. */
export function fillCode(pre, text) {
  const all = document.createDocumentFragment();
  for (const line of text.split('\n')) all.append(el('span', { class: 'add' }, marked(line)));
  pre.replaceChildren(all);
}

/** The code of a reviewed file (`fileHead`), as far as its `text` goes. */
export function codeView(f) {
  const pre = el('pre', { class: 'diff file', 'aria-label': `Code of ${f.label} ${f.url}`, tabindex: '0' });
  fillCode(pre, f.text);
  return pre;
}

export function userScriptsNotice(capability) {
  if (capability.ready) return null;
  return el('p', { class: 'notice', role: 'status' },
    el('strong', {}, 'Scripts cannot run. '),
    'Turn on “Allow User Scripts”: open chrome://extensions, click Details on Lumo Userscripts, and switch on “Allow User Scripts”. Stored scripts start running as soon as it is on.');
}
