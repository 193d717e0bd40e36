// Connects the real extension, in headless Chromium, to the bridge the conformance suite tests,
// the way a user does: the connect link from the bridge's stderr, then a click on the connect page.
// Before the suite: a tool call through the bridge's HTTP endpoint must be answered by the
// extension. On SIGUSR2 (after the suite): the link must still be up, then Chromium closes.
// Prints "connected" on stdout when ready; exits non-zero on any failure.
// Usage: node extension.mjs BRIDGE_LOG HTTP_PORT   (TOKEN in the environment)
import fs from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { launch, PROVIDER_ID } from '../../tests/e2e/lib/harness.mjs';

const [log, httpPort] = process.argv.slice(2);
const fail = (m) => { console.error(`conformance/extension: ${m}`); process.exit(1); };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function mcp() {
  const client = new Client({ name: 'conformance-extension-check', version: '0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${httpPort}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TOKEN}` } },
  }));
  return client;
}
const bridgeStatus = async (c) => (await c.callTool({ name: 'bridge_status', arguments: {} })).structuredContent;

let link;
for (let i = 0; i < 100 && !link; i++) {
  link = fs.readFileSync(log, 'utf8').match(/^chrome-extension:\/\/\S+/m)?.[0];
  if (!link) await sleep(100);
}
if (!link?.startsWith(`chrome-extension://${PROVIDER_ID}/connect.html?`)) fail(`no connect link in ${log}`);

const h = await launch();
const events = [];
h.watchPanics(events);
h.context.on('console', (m) => { if (m.type() === 'error') events.push(`console error: ${m.text()}`); });
h.context.on('serviceworker', (w) => { if (w.url().includes(PROVIDER_ID)) events.push('the provider worker started again'); });
let client;
try {
  const page = await h.context.newPage();
  const t0 = Date.now();
  page.on('close', () => events.push(`the connect page closed at ${Date.now() - t0} ms`));
  for (const w of h.context.serviceWorkers()) {
    if (w.url().includes(PROVIDER_ID)) w.on('close', () => events.push(`the provider worker closed at ${Date.now() - t0} ms`));
  }
  await page.goto(link);
  await page.locator('#tools li').first().waitFor();
  await page.click('#connect');
  await page.waitForFunction(() => document.getElementById('state').dataset.state === 'connected', null, { timeout: 15_000 });
  client = await mcp();
  const s = await bridgeStatus(client);
  if (s?.connected !== true) fail(`the bridge does not see the extension: ${JSON.stringify(s)}`);
  // A real tool call, answered by the extension's tool walk (not by the bridge).
  const r = await client.callTool({ name: 'status', arguments: {} });
  if (r.isError) fail(`status through the extension failed: ${JSON.stringify(r)}`);
  console.log('connected');
} catch (e) {
  await h.close();
  fail(e.stack ?? String(e));
}

// SIGUSR2, not SIGTERM: Playwright closes the browser on SIGTERM itself, which would race the check.
process.on('SIGUSR2', async () => {
  let code = 0;
  try {
    const s = await bridgeStatus(client);
    if (s?.connected !== true) {
      const ext = await h.internal('bridge.status').then((v) => v.bridge, (e) => String(e));
      events.push(`the extension's view: ${JSON.stringify(ext)}`);
      throw new Error(`the extension is no longer connected: ${JSON.stringify(s)}; in the browser: ${JSON.stringify(events)}`);
    }
    console.error('conformance/extension: the extension stayed connected through the suite');
  } catch (e) {
    console.error(`conformance/extension: ${e.message}`);
    code = 1;
  }
  await client.close().catch(() => {});
  await h.close();
  process.exit(code);
});
setInterval(() => {}, 1 << 30);
