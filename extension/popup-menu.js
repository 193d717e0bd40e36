// The popup's "Menu commands" section: the commands userscripts registered
// (GM_registerMenuCommand) in the pages of the active tab, as the service worker keeps them.
// A click asks the worker to run that command in that script's page; the page runs it.
import { ARM_MS, ask, el, say, marked, oneAtATime } from './ui.js';

/** The tab the popup is about: the active tab of its window. Opened as a tab of its own
 *  (pinned, or by tests), the popup is about the tab used most recently before it. */
export async function targetTab() {
  const self = await chrome.tabs.getCurrent();
  if (!self) return (await chrome.tabs.query({ active: true, currentWindow: true }))[0];
  const tabs = (await chrome.tabs.query({})).filter((t) => t.id !== self.id);
  return tabs.sort((a, b) => (b.lastAccessed ?? 0) - (a.lastAccessed ?? 0))[0];
}

/** After a click: the command's script may copy. Chrome refuses its page's own write (this
 *  click and the focus are the popup's), so the popup writes what the page asks, with this
 *  click's user action, and says so; the page is told how it went. Only the clicked entry's
 *  script can ask, within seconds of the click (the worker's `gm::clipboard`). A command may
 *  copy more than once: each write is asked for in turn, and the last one stays. */
async function copyFor(item, c, status) {
  for (let n = 0; n < 4; n++) {
    const got = await ask('menu.clipboard', { entry: item.entry });
    if (typeof got.ticket !== 'number') return;
    let error = null;
    try {
      const text = String(got.text);
      const parts = { 'text/plain': new Blob([text], { type: 'text/plain' }) };
      if (got.html) parts['text/html'] = new Blob([text], { type: 'text/html' });
      await navigator.clipboard.write([new ClipboardItem(parts)]);
    } catch (e) {
      error = e?.message ?? String(e);
    }
    await ask('menu.clipboardDone', { ticket: got.ticket, error });
    if (error) throw new Error(`"${c.caption}" of ${item.name} could not copy: ${error}`);
    say(status, `"${c.caption}" of ${item.name} copied ${[...String(got.text)].length} characters to the clipboard.`);
  }
}

export function menuSection(section, list, status) {
  // A command runs a script's code in the page, so, as the audit's Undo, a button that moved
  // under the pointer takes no click for ARM_MS: when the list is rebuilt (a page added or
  // dropped a command) or something above it changes size (a review, the status line a click
  // writes), the second click of a double-click must not run the command that moved there.
  let armTimer = 0;
  let disarmed = false;
  const buttons = () => list.querySelectorAll('button');
  const disarm = () => {
    disarmed = true;
    for (const b of buttons()) b.disabled = true;
    clearTimeout(armTimer);
    armTimer = setTimeout(() => {
      disarmed = false;
      for (const b of buttons()) if (!b.dataset.busy) b.disabled = false;
    }, ARM_MS);
  };
  const moved = new ResizeObserver(disarm);
  for (let e = section.previousElementSibling; e; e = e.previousElementSibling) moved.observe(e);

  let last = '';
  const refresh = oneAtATime(async () => {
    const tab = await targetTab();
    const { items } = tab?.id != null ? await ask('menu.list', { tab: tab.id }) : { items: [] };
    // Rebuilt only when it changed: a rebuild would move the pointer's target and keyboard focus.
    const key = JSON.stringify([tab?.id, items]);
    if (key === last) return;
    last = key;
    section.hidden = items.length === 0;
    list.replaceChildren(...items.map((item) => el('li', { 'data-script': item.uuid },
      el('p', {}, el('strong', {}, marked(item.name)), item.frameId ? el('small', {}, ' (in a frame)') : null),
      el('div', { class: 'row wrap' }, item.commands.map((c) => el('button', {
        type: 'button', 'data-command': c.id, accesskey: c.accessKey ?? undefined,
        onclick: async (ev) => {
          const b = ev.currentTarget;
          b.disabled = true;
          b.dataset.busy = '1';
          try {
            const { delivered } = await ask('menu.click', { entry: item.entry, id: c.id });
            say(status, delivered ? `Ran "${c.caption}" of ${item.name}.` : `"${c.caption}" will run when the page next asks (within seconds).`);
            copyFor(item, c, status).catch((e) => say(status, e.message, 'error'));
          } catch (e) {
            say(status, e.message, 'error');
          } finally {
            delete b.dataset.busy;
            if (!disarmed) b.disabled = false;
          }
        },
      }, marked(c.caption)))))));
    disarm();
  });
  setInterval(() => refresh().catch(() => {}), 1000);
  return refresh().catch((e) => say(status, e.message, 'error'));
}
