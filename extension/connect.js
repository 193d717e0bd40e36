// The connect page: shows the bridge's address and the tools it will expose, and connects only
// on the user's click. The service worker decides (loopback rule, token format) and owns the
// authorization and the socket; this page asks it and renders what it answers.
import { ask, el, say } from './ui.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const host = params.get('host') ?? '127.0.0.1';
const port = Number(params.get('port'));
const token = params.get('token') ?? '';
const status = $('status');
// Off the address bar (a shared screen, a copied address); Chrome's history still holds the link
// as opened, in this user's profile (README, "Token leakage").
if (params.has('token')) {
  params.delete('token');
  history.replaceState(null, '', `${location.pathname}?${params}`);
}

$('host').textContent = host;
$('port').textContent = Number.isFinite(port) && port > 0 ? String(port) : '(none)';

/** The tool list as last drawn: whether it was drawn, and for a read-only link. */
let toolsShown = null;
/** Whether this page's Connect was clicked: the reason that link ended is shown even when the
 *  worker forgot the authorization (a token the program on this port could not prove). */
let clicked = false;
async function render() {
  const s = await ask('bridge.status', { host, port, token });
  const b = s.bridge;
  const mine = s.authorized && b.port === port && b.host === host;
  // Connected read-only, the write tools are not exposed: said so, as the agent lists none.
  const readonly = mine && b.state === 'connected' && b.readonly;
  if (toolsShown !== readonly) {
    toolsShown = readonly;
    $('tools').replaceChildren(...s.tools.map((t) => el('li', {}, el('code', {}, t.name), ' ', t.title,
      !t.write ? el('small', {}, ' · read only')
        : readonly ? el('small', {}, ' · not exposed: this link is read-only') : el('small', {}, ' · changes your scripts'))));
  }
  const warn = $('address-warning');
  warn.hidden = s.address.ok;
  warn.textContent = s.address.ok ? '' : s.address.error;
  if (!s.address.loopback) $('advanced').open = true;
  const state = !mine ? 'not connected'
    : b.state === 'connected' ? `connected${b.readonly ? ' (the bridge is read-only)' : ''}`
      : b.state === 'connecting' ? 'connecting…'
        : b.state === 'retrying' ? 'reconnecting…' : 'not connected';
  $('state').textContent = state;
  $('state').dataset.state = mine ? b.state : 'off';
  $('remember').checked ||= s.remembered;
  $('disconnect').hidden = !(mine && b.state !== 'off');
  const ours = mine || (clicked && b.port === port && b.host === host);
  if (ours && b.error && b.state !== 'connected') say(status, b.error, 'error');
}

$('connect').addEventListener('click', async () => {
  try {
    await ask('bridge.connect', {
      host, port, token,
      remember: $('remember').checked,
      allowRemote: $('allow-remote').checked,
    });
    clicked = true;
    say(status, 'Connecting…');
  } catch (e) {
    say(status, e.message, 'error');
  }
  render().catch(() => {});
});

$('disconnect').addEventListener('click', async () => {
  try {
    await ask('bridge.disconnect');
    say(status, 'Disconnected.');
  } catch (e) {
    say(status, e.message, 'error');
  }
  render().catch(() => {});
});

render().catch((e) => say(status, e.message, 'error'));
setInterval(() => render().catch(() => {}), 500);
