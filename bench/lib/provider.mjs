// The provider's set-up every bench shares: the test host approved (through a quiet provider page,
// closed again) and "Allow User Scripts" switched on (chrome://extensions, as the e2e tests do).
import { createHash, randomUUID } from "node:crypto";
import { HOST_ID, PROVIDER_ID as P } from "../../tests/e2e/lib/harness.mjs";
import { userscript } from "./userscript.mjs";

/**
 * A provider page that stays quiet: options.html re-renders (asking the worker for the whole
 * script list) on every storage change and every 2 s, which would land in the samples.
 */
export const providerPage = (browser) => browser.page(`chrome-extension://${P}/manifest.json`);

/** Approves the e2e test host and turns on "Allow User Scripts" for the provider. */
export async function approveHostAndAllowScripts(browser) {
  const page = await providerPage(browser);
  const added = await page.eval((msg) => chrome.runtime.sendMessage(msg), { channel: "lumo:internal", op: "policy.add", id: HOST_ID, name: "Lumo Test Host" });
  if (added?.ok !== true) throw new Error(`policy.add: ${JSON.stringify(added)}`);
  await page.close(); // an open provider page would keep its process warm for cold starts
  const extensions = await browser.page("chrome://extensions/");
  await extensions.eval((extensionId) => chrome.developerPrivate.updateExtensionConfiguration({ extensionId, userScriptsAccess: true }), P);
  await extensions.close();
}

/** The stored record and the chrome.userScripts registration of one script: what `seedCopies` copies. */
export async function template(page, uuid) {
  const [record, registration] = await page.eval(async (uuid) => [
    (await chrome.storage.local.get(`script/${uuid}`))[`script/${uuid}`],
    (await chrome.userScripts.getScripts({ ids: [uuid] }))[0],
  ], uuid);
  if (!registration) throw new Error("the first script was not registered: is \"Allow User Scripts\" on?");
  return { record, registration };
}

/**
 * Fills the store up to `n` scripts with copies of a `template` (storage layout of
 * ARCHITECTURE.md), written from a provider page: registering 1,000 scripts one by one, as the
 * provider's start-up reconcile would, takes minutes because each register call gets slower with
 * every script stored. `uuids` (the stored ones, in order) grows to `n`. The provider must be
 * restarted after it to read the new index.
 */
export async function seedCopies(page, { record, registration }, uuids, n) {
  const items = {};
  const registrations = [];
  for (let i = uuids.length; i < n; i++) {
    const uuid = randomUUID();
    const source = userscript(i);
    const time = record.createdAt + i;
    items[`script/${uuid}`] = {
      ...record, uuid, metadata: { ...record.metadata, name: `Bench script ${String(i).padStart(4, "0")}` },
      sha256: createHash("sha256").update(source).digest("hex"), size: Buffer.byteLength(source), createdAt: time, updatedAt: time,
    };
    items[`source/${uuid}`] = source;
    registrations.push({ ...registration, id: uuid, js: [{ code: source }] });
    uuids.push(uuid);
  }
  items["scripts/index"] = { uuids };
  await page.eval(async (items, regs) => {
    await chrome.storage.local.set(items);
    await chrome.userScripts.register(regs);
  }, items, registrations);
}

/**
 * The stored scripts profile.mjs and write-timeline.mjs run with: 10 written through
 * write_script from the `host` page (lib/inpage.js's `bench`), the rest up to `stored` copies of
 * the first (as `make bench` seeds them, from the provider `page`), read once by a restarted
 * worker. Returns the first script as write_script answered it.
 */
export async function storeScripts(browser, host, page, stored) {
  const tool = (name, args) => host.eval((c) => bench.call(c), { id: P, method: "tools/call", params: { name, arguments: args } });
  const first = (await tool("write_script", { source: userscript(0) })).result.structuredContent.script;
  for (let i = 1; i < 10; i++) await tool("write_script", { source: userscript(i) });
  if (stored > 10) {
    const index = await page.eval(() => chrome.storage.local.get("scripts/index").then((r) => r["scripts/index"].uuids));
    await seedCopies(page, await template(page, first.uuid), index, stored);
    await browser.stopWorker(P);
    await host.eval((id) => bench.probe(id), P);
    await browser.waitRunning(P);
    await host.eval((id) => { bench.timeoutMs = 600_000; return bench.open(id); }, P);
    await tool("list_scripts", {}); // the restarted worker reads every record once, here
    await host.eval(() => { bench.timeoutMs = 10_000; });
  }
  return first;
}
