// The popup's "Scripts on this tab": the scripts whose rules reach the address the active tab
// shows, and those that ran in its page though they are not reached from that address now (in a
// frame; before a single-page site changed the address), each with what its last run there
// reported (seen running, or threw, or not seen, and the worker's note of why), and
// a switch that turns the script on or off everywhere (`scripts.setEnabled`, as on the options
// page). The service worker decides which scripts are listed (`tab.scripts`: as match_url does).
import { ARM_MS, ask, el, say, marked, oneAtATime } from './ui.js';
import { targetTab } from './popup-menu.js';

/** What the row says of the script on this page. */
function state(s) {
  if (!s.enabled) return 'Off';
  if (!s.runs) return s.reason;
  const seen = s.seen;
  if (!seen) return s.note ? 'Not seen running on this page' : 'Not seen running on this page (it may have loaded before the script was on)';
  if (seen.ok === false && seen.error) {
    const e = seen.error;
    const where = e.inRequire ? ' (in its @require code)' : e.line ? ` (line ${e.line})` : '';
    return `Threw here: ${e.name}: ${e.message}${where}`;
  }
  const late = seen.lateErrors ? `, then ${seen.lateErrors} error${seen.lateErrors === 1 ? '' : 's'} (see Runs on the settings page)` : '';
  return `Ran here${late}`;
}

export function tabSection(section, list, status) {
  let last = '';
  let tabId = null;
  // A switch turns a script on or off everywhere, so, as the menu's buttons and the audit's
  // Undo, one that moved under the pointer (its list rebuilt, or something above it resized)
  // takes no click for ARM_MS (a reviewer's: a row's text grows as a run arrives).
  let armTimer = 0;
  const disarm = () => {
    for (const b of list.querySelectorAll('input')) b.disabled = true;
    clearTimeout(armTimer);
    armTimer = setTimeout(() => {
      for (const b of list.querySelectorAll('input')) if (!b.dataset.busy) b.disabled = false;
    }, ARM_MS);
  };
  const moved = new ResizeObserver(disarm);
  for (let e = section.previousElementSibling; e; e = e.previousElementSibling) moved.observe(e);
  const reload = el('button', { type: 'button', hidden: true, onclick: async () => {
    reload.hidden = true;
    if (tabId != null) await chrome.tabs.reload(tabId).catch((e) => say(status, e.message, 'error'));
  } }, 'Reload the tab');
  section.append(reload);
  const refresh = oneAtATime(async () => {
    const tab = await targetTab();
    const got = tab?.id != null ? await ask('tab.scripts', { tab: tab.id }) : { scripts: [] };
    const key = JSON.stringify([tab?.id, got.scripts, got.note]);
    if (key === last) return;
    // Another tab: a reload offered for the one before is not this one's.
    if (tab?.id !== tabId) reload.hidden = true;
    last = key;
    tabId = tab?.id ?? null;
    section.hidden = got.scripts.length === 0 && !got.note;
    list.replaceChildren(...(got.note ? [el('li', {}, el('small', {}, got.note))] : []), ...got.scripts.map((s) => {
      const box = el('input', { type: 'checkbox', checked: s.enabled, 'aria-label': `${s.name}: on` });
      box.addEventListener('change', async () => {
        box.disabled = true;
        box.dataset.busy = '1';
        try {
          await ask('scripts.setEnabled', { uuid: s.uuid, enabled: box.checked });
          // A page keeps the code it loaded with: the change reaches this tab at its next load.
          say(status, `${box.checked ? 'Turned on' : 'Turned off'} ${s.name}: this tab has it so at its next load.`);
          reload.hidden = false;
        } catch (e) {
          box.checked = !box.checked;
          say(status, e.message, 'error');
        } finally {
          delete box.dataset.busy;
          box.disabled = false;
          refresh().catch(() => {});
        }
      });
      return el('li', { 'data-script': s.uuid },
        el('label', { class: 'row' }, box, el('strong', {}, marked(s.name))),
        el('small', { class: 'tab-state' }, marked(s.note ? `${state(s)}: ${s.note}` : state(s))));
    }));
    disarm();
  });
  setInterval(() => refresh().catch(() => {}), 1000);
  return refresh().catch((e) => say(status, e.message, 'error'));
}
