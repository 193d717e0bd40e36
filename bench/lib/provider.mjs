// The provider's set-up every bench shares: the test host approved (through a quiet provider page,
// closed again) and "Allow User Scripts" switched on (chrome://extensions, as the e2e tests do).
import { HOST_ID, PROVIDER_ID as P } from "../../tests/e2e/lib/harness.mjs";

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
