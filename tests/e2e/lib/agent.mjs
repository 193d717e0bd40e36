// The set-up most e2e files share: a browser with the test host approved as a caller, "Allow User
// Scripts" on, a static server, an MCP session through the official SDK client in the test host,
// and a tab for target pages; the agent's tool calls with their assertions; a userscript that
// leaves a mark on the page; and "load a page and see which scripts ran".
import assert from "node:assert/strict";
import { HOST_ID, PROVIDER_ID, launch, startStaticServer } from "./harness.mjs";
import { sleep } from "./util.mjs";

/** The page most tests load (tests/e2e/fixtures/pages). */
export const PAGE = "/userscripts/page.html";
/** How long a script may take to show its effect on a page that should run it. */
export const RUN_TIMEOUT_MS = 5000;
/** After the page's load event (document_idle has passed by then): how long to wait for a script that should not run. */
export const SETTLE_MS = 500;
/** How long the provider may take to see the "Allow User Scripts" toggle (the probe tests allow the same). */
export const TOGGLE_MS = 2000;

/**
 * A userscript whose body appends <lumo-mark data-tag="tag" data-v="version"> to <html>, so a
 * page shows which scripts ran, in which version, and how often.
 */
export function markScript({ tag, version = "v1", name = `E2E ${tag}`, namespace = "lumo-e2e", match = ["http://127.0.0.1/*"], excludeMatch = [] }) {
  return [
    "// ==UserScript==",
    `// @name         ${name}`,
    `// @namespace    ${namespace}`,
    ...match.map((m) => `// @match        ${m}`),
    ...excludeMatch.map((m) => `// @exclude-match ${m}`),
    "// ==/UserScript==",
    "(() => {",
    '  const mark = document.createElement("lumo-mark");',
    `  mark.dataset.tag = ${JSON.stringify(tag)};`,
    `  mark.dataset.v = ${JSON.stringify(version)};`,
    "  document.documentElement.append(mark);",
    "})();",
    "",
  ].join("\n");
}

/** The marks left on a page, sorted, as "tag:version" strings. */
export const marksOf = (page) => page.evaluate(() => [...document.querySelectorAll("lumo-mark")].map((m) => `${m.dataset.tag}:${m.dataset.v}`).sort());

/** Loads `url` in `page`, or reloads it when it is already there. */
async function load(page, url) {
  if (page.url() === url) await page.reload({ waitUntil: "load" });
  else await page.goto(url, { waitUntil: "load" });
}

/**
 * Loads `url` once and returns the marks once the expected ones appeared (failing the test when
 * they do not within RUN_TIMEOUT_MS) and the page then settled: load event + SETTLE_MS. The caller
 * compares the result exactly, so missing, extra, stale-version and double runs all show.
 */
export async function visit(page, url, expected = []) {
  await load(page, url);
  if (expected.length) {
    await page.waitForFunction(
      (want) => want.every((w) => [...document.querySelectorAll("lumo-mark")].some((m) => `${m.dataset.tag}:${m.dataset.v}` === w)),
      expected, { timeout: RUN_TIMEOUT_MS },
    ).catch(async () => assert.fail(`expected marks ${JSON.stringify(expected)} within ${RUN_TIMEOUT_MS} ms on ${url}, page has ${JSON.stringify(await marksOf(page))}`));
  }
  await page.waitForFunction(() => document.readyState === "complete");
  await sleep(SETTLE_MS);
  return marksOf(page);
}

/**
 * Loads the page until exactly `expected` ran there (bounded by `timeout`), for steps where the
 * provider registers in the background: each load waits for the load event and SETTLE_MS, never
 * for marks (a registration that lands later needs a new load, not a longer wait). Returns the
 * marks seen last, so the caller's exact comparison says what ran.
 */
export async function seen(page, url, expected, timeout = 3000) {
  return (await seenAfter(page, url, expected, timeout)).marks;
}

/** `seen`, with the number of loads it took. */
export async function seenAfter(page, url, expected, timeout = TOGGLE_MS) {
  const want = JSON.stringify([...expected].sort());
  let marks;
  let loads = 0;
  for (const deadline = Date.now() + timeout; ;) {
    marks = await visit(page, url);
    loads++;
    if (JSON.stringify(marks) === want || Date.now() > deadline) return { marks, loads };
  }
}

/** The agent's tool calls on the test host's MCP session (`session()` is read at each call). */
export function tools(h, session) {
  const call = async (name, args = {}) => {
    const res = await h.lumo("callTool", session(), name, args);
    assert.ok(!res?.error, `${name}: MCP call failed: ${JSON.stringify(res?.error)}`);
    return res;
  };
  /** Calls a tool that must succeed; returns its structuredContent. */
  const ok = async (name, args) => {
    const res = await call(name, args);
    assert.equal(res.isError, false, `${name} ${JSON.stringify(args)} failed: ${res.content?.[0]?.text}`);
    return res.structuredContent;
  };
  /** Calls a tool that must fail with `code`; returns the whole result. */
  const fails = async (name, args, code) => {
    const res = await call(name, args);
    assert.equal(res.isError, true, `${name} should fail with ${code}, got ${JSON.stringify(res.structuredContent)}`);
    assert.equal(res.structuredContent?.error_code, code, `${name}: ${res.content?.[0]?.text}`);
    return res;
  };
  const get = async (uuid) => (await ok("get_script", { uuid })).script;
  const listed = async (args = {}) => (await ok("list_scripts", args)).scripts;
  return { call, ok, fails, get, listed };
}

/** Probes once (as a real host does before using the provider); returns the L0 result. */
export const probe = (h) => h.lumo("probe", PROVIDER_ID, { openSession: false });

/** Probes until status.ready is `wanted` (the toggle reaches the worker asynchronously). */
export async function probeUntilReady(h, wanted = true, timeout = TOGGLE_MS) {
  let r;
  for (const deadline = Date.now() + timeout; ;) {
    r = await probe(h);
    if (r.response?.status?.ready === wanted || Date.now() > deadline) return r;
    await sleep(100);
  }
}

/**
 * A fresh browser with the host approved, "Allow User Scripts" set to `access` (and the provider
 * seen ready), a server (`server()`, the static pages by default; anything with `close()`), an
 * open MCP session, a tab for the target pages and the agent's `tools`. `launch`: the harness's
 * launch options (e.g. `{ bfcache: true }`). `incognito`: the provider also allowed in incognito
 * windows first (`h.allowIncognitoAndApproveHost()`: Chrome reloads the extension for it). A
 * failed set-up closes what it opened (Chromium left running would keep the test process alive).
 */
export async function setUp({ access = true, server: startServer = startStaticServer, launch: launchOptions, incognito = false } = {}) {
  const h = await launch(launchOptions);
  let server;
  const close = async () => {
    await h.close();
    await server?.close();
  };
  try {
    server = await startServer();
    if (incognito) await h.allowIncognitoAndApproveHost();
    else await h.internal("policy.approve", { id: HOST_ID });
    if (access) {
      assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
      const r = await probeUntilReady(h, true);
      assert.equal(r.state, "connected", `setup: provider ready: ${r.text}`);
    }
    const session = await h.lumo("connect", PROVIDER_ID);
    assert.equal(typeof session, "number", `setup: MCP session: ${JSON.stringify(session)}`);
    const tab = await h.context.newPage();
    const env = { h, server, session, tab, close, url: (path = PAGE) => `${server.url}${path}` };
    env.tools = tools(h, () => env.session);
    return env;
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * Chrome's own view: chrome.userScripts.getScripts() from a fresh provider page. Note that the
 * options page talks to the worker, which makes the provider reconcile: tests that check that
 * something else (a probe, a worker start) re-registers scripts look at the page first.
 */
export async function registrations(h) {
  const page = await h.context.newPage();
  try {
    await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    return await page.evaluate(async () => {
      if (!chrome.userScripts) return { unavailable: true };
      return chrome.userScripts.getScripts();
    });
  } finally {
    await page.close();
  }
}
