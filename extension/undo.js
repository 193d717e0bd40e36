// "Undo" beside each audited write of the last hour in the popup: brings back the revision
// before that write (scripts.undo in the service worker). When the script changed since, nothing
// is overwritten: the popup says so and shows the changes made since instead.
import { el, say } from './ui.js';

const HOUR_MS = 60 * 60 * 1000;

/**
 * The Undo control for an audit entry, or null. `undoable`: the worker says Undo can revert it
 * (`audit.list`'s `undoable`, by the rule Undo itself applies); the popup offers it for an hour.
 */
export function undoButton(entry, undoable, now = Date.now()) {
  if (!undoable || now - entry.at > HOUR_MS) return null;
  const out = el('div', { class: 'undo-result' });
  const button = el('button', { class: 'undo', 'aria-label': `Undo ${entry.tool} on ${entry.target}`, onclick: async () => {
    button.disabled = true;
    button.dataset.busy = '1';
    const r = await chrome.runtime.sendMessage({ channel: 'lumo:internal', op: 'scripts.undo', uuid: entry.target, caller: entry.caller, at: entry.at, via: 'popup' });
    const status = document.getElementById('status');
    if (r?.ok) {
      say(status, `Undone: ${entry.tool} on ${entry.target.slice(0, 8)}.`);
      out.replaceChildren();
    } else {
      say(status, `Not undone: ${r?.error ?? 'no answer'}`, 'error');
      out.replaceChildren(el('p', { class: 'notice' }, r?.error ?? ''),
        r?.diff ? el('pre', { class: 'diff', 'aria-label': 'Changes made since that write' },
          r.diff.split('\n').map((l) => el('div', { class: l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : '' }, l || ' '))) : '');
      delete button.dataset.busy;
      button.disabled = false;
    }
  } }, 'Undo');
  return el('span', {}, button, out);
}
