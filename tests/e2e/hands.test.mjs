// The user's own hands, in the real options page and popup: the editor (keyboard only), import,
// export and restore from the export, the trash, and "Undo" in the popup, each checked on a page
// where the script is seen running.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HOST_ID, PROVIDER_ID, launch, startStaticServer } from "./lib/harness.mjs";
import { sleep } from "./lib/util.mjs";

const T = { timeout: 90_000 };
const PAGE = "/userscripts/page.html";

function userscript({ tag, version, name = `Hands ${tag}`, namespace = "lumo-e2e-hands" }) {
  return [
    "// ==UserScript==",
    `// @name         ${name}`,
    `// @namespace    ${namespace}`,
    "// @match        http://127.0.0.1/*",
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

const marksOf = (page) => page.evaluate(() => [...document.querySelectorAll("lumo-mark")].map((m) => `${m.dataset.tag}:${m.dataset.v}`).sort());

async function seen(page, url, expected, timeout = 3000) {
  const want = JSON.stringify([...expected].sort());
  let marks;
  for (const deadline = Date.now() + timeout; ;) {
    if (page.url() === url) await page.reload({ waitUntil: "load" });
    else await page.goto(url, { waitUntil: "load" });
    await sleep(400);
    marks = await marksOf(page);
    if (JSON.stringify(marks) === want || Date.now() > deadline) return marks;
  }
}

describe("the user's own hands: editor, import/export, trash and undo", () => {
  let h, server, session, tab, url, options;
  const call = async (name, args) => {
    const res = await h.lumo("callTool", session, name, args);
    assert.equal(res.isError, false, `${name}: ${res.content?.[0]?.text}`);
    return res.structuredContent;
  };
  const onPage = (expected) => seen(tab, url, expected);
  const scripts = async () => (await h.internal("scripts.list")).scripts;
  const status = () => options.locator("#status").textContent();
  const openOptions = async () => {
    options = await h.context.newPage();
    await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    options.on("dialog", (d) => d.accept());
  };

  before(async () => {
    h = await launch();
    server = await startStaticServer();
    url = `${server.url}${PAGE}`;
    await h.internal("policy.approve", { id: HOST_ID });
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    for (const deadline = Date.now() + 2000; ;) {
      const r = await h.lumo("probe", PROVIDER_ID, { openSession: false });
      if (r.response?.status?.ready === true || Date.now() > deadline) break;
      await sleep(100);
    }
    session = await h.lumo("connect", PROVIDER_ID);
    tab = await h.context.newPage();
    await openOptions();
  });
  after(async () => { await h?.close(); await server?.close(); });

  test("popup Undo of an agent write brings back the version before it; after a later change it shows the conflict instead", T, async () => {
    const w = await call("write_script", { source: userscript({ tag: "u", version: "v1" }) });
    const uuid = w.script.uuid;
    await call("write_script", { uuid, revision: 1, source: userscript({ tag: "u", version: "v2" }) });
    assert.deepEqual(await onPage(["u:v2"]), ["u:v2"]);
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    // The write that made v2: the newest write_script on it now; found again by its time later.
    const v2write = (await h.internal("audit.list")).entries.find((e) => e.tool === "write_script" && e.target === uuid && e.result === "ok");
    const entryIndex = async () => (await h.internal("audit.list")).entries.findIndex((e) => e.at === v2write.at && e.tool === "write_script");
    const undoOf = async () => popup.locator("#audit > li").nth(await entryIndex()).getByRole("button", { name: /^Undo/ });
    await (await undoOf()).click();
    await popup.getByText(/^Undone/).waitFor({ timeout: 3000 });
    assert.deepEqual(await onPage(["u:v1"]), ["u:v1"], "the page runs v1 again");
    const l = await call("list_revisions", { uuid });
    assert.equal(l.revisions[0].by, "user");
    assert.equal(l.revisions[0].via, "popup");

    // The agent changes it again; undoing that old write now would overwrite the change.
    await call("write_script", { uuid, revision: 3, source: userscript({ tag: "u", version: "v4" }) });
    await popup.reload();
    await (await undoOf()).click();
    await popup.getByText(/changed since that write/).first().waitFor({ timeout: 3000 });
    const diff = await popup.locator("pre.diff").first().textContent();
    assert.match(diff, /v4/, "the diff shows the change made since");
    assert.deepEqual(await onPage(["u:v4"]), ["u:v4"], "nothing was overwritten");
    await popup.close();
  });

  test("the user creates and edits a script in the options page with the keyboard only, and it runs", T, async () => {
    await options.reload();
    await options.locator("#editor-new").focus();
    await options.keyboard.press("Enter");
    const area = options.locator("#editor-text");
    await area.waitFor();
    assert.equal(await options.evaluate(() => document.activeElement?.id), "editor-text", "the editor has the focus");
    await options.keyboard.press("Control+A");
    await options.keyboard.press("Delete");
    const lines = userscript({ tag: "k", version: "v1", name: "Keyboard" }).split("\n");
    for (const line of lines.slice(0, -1)) {
      await options.keyboard.type(line.trimStart());
      await options.keyboard.press("Enter");
    }
    // A bad line shows its error at its line before saving.
    await options.keyboard.press("Control+s");
    await options.getByText(/^Saved Keyboard/).waitFor({ timeout: 3000 });
    assert.deepEqual(await onPage(["k:v1", "u:v4"]), ["k:v1", "u:v4"], "the new script runs");
    // Edit: change v1 to v2 with the keyboard (End of the line, backspace, type), save with Ctrl+S.
    const text = await area.inputValue();
    const at = text.indexOf('"v1"') + 3;
    await area.evaluate((t, at) => t.setSelectionRange(at, at), at);
    await options.keyboard.press("Backspace");
    await options.keyboard.type("2");
    await options.keyboard.press("End");
    await options.keyboard.press("Tab"); // indents (two spaces, at the end of the line) instead of leaving
    assert.equal(await options.evaluate(() => document.activeElement?.id), "editor-text");
    await options.keyboard.press("Control+s");
    await options.getByText(/^Saved Keyboard \(revision 2\)/).waitFor({ timeout: 3000 });
    assert.deepEqual(await onPage(["k:v2", "u:v4"]), ["k:v2", "u:v4"], "the edited script runs");
    const s = (await scripts()).find((x) => x.name === "Keyboard");
    assert.equal(s.createdBy, "user");
    // Metadata errors show at their line.
    const second = (await area.inputValue()).indexOf("\n") + 1;
    await area.evaluate((t, at) => { t.setSelectionRange(at, at); }, second);
    await options.keyboard.type("// @match nope\n");
    await options.locator("#editor-diagnostics li.error").first().waitFor({ timeout: 3000 });
    assert.match(await options.locator("#editor-diagnostics").textContent(), /line 2 error/);
  });

  test("read-only mode stops the agent but not the user's own edits", T, async () => {
    await h.internal("policy.setSwitch", { name: "writes", value: false });
    try {
      const res = await h.lumo("callTool", session, "write_script", { source: userscript({ tag: "ro", version: "v1" }) });
      assert.equal(res.structuredContent?.error_code, "WRITE_DISABLED");
      const r = await h.internal("scripts.save", { source: userscript({ tag: "ro", version: "v1" }) });
      assert.equal(r.result.script.createdBy, "user");
    } finally {
      await h.internal("policy.setSwitch", { name: "writes", value: true });
    }
  });

  test("import three .user.js files, one a duplicate (asked, replaced); a 50 MB file and a non-userscript are refused unread", T, async () => {
    await options.reload();
    const files = [
      { name: "a.user.js", mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: "ia", version: "v1", name: "Imported A" })) },
      { name: "b.user.js", mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: "ib", version: "v1", name: "Imported B" })) },
      { name: "u.user.js", mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: "u", version: "v9" })) }, // same @namespace + @name as "Hands u"
    ];
    await options.locator("#import-files").setInputFiles(files);
    await options.getByText(/u\.user\.js: replaced/).waitFor({ timeout: 5000 });
    const names = (await scripts()).map((s) => s.name).sort();
    assert.deepEqual(names.filter((n) => n.startsWith("Imported")), ["Imported A", "Imported B"]);
    assert.equal(names.filter((n) => n === "Hands u").length, 1, "the duplicate replaced, not added");
    assert.deepEqual(await onPage(["ia:v1", "ib:v1", "k:v2", "ro:v1", "u:v9"]), ["ia:v1", "ib:v1", "k:v2", "ro:v1", "u:v9"]);

    const { writeFileSync, mkdtempSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const huge = `${mkdtempSync(`${tmpdir()}/lumo-hands-`)}/huge.user.js`;
    writeFileSync(huge, Buffer.alloc(50 * 1024 * 1024, 0x20));
    await options.locator("#import-files").setInputFiles(huge);
    await options.getByText(/huge\.user\.js: refused, \d+ bytes is over/).waitFor({ timeout: 10_000 });
    await options.locator("#import-files").setInputFiles([{ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("hello") }]);
    await options.getByText(/notes\.txt: refused, not a userscript/).waitFor({ timeout: 3000 });
  });

  test("export -> wipe -> restore from the export brings back every script byte for byte, enabled states too", T, async () => {
    const all = await scripts();
    await h.internal("scripts.setEnabled", { uuid: all.find((s) => s.name === "Imported B").uuid, enabled: false });
    const before = [];
    for (const s of await scripts()) {
      const { script } = await h.internal("scripts.get", { uuid: s.uuid });
      before.push([script.name, script.enabled, script.source]);
    }
    await options.reload();
    const [download] = await Promise.all([options.waitForEvent("download"), options.locator("#export-all").click()]);
    const path = await download.path();
    const { readFileSync } = await import("node:fs");
    const backup = readFileSync(path);
    assert.equal(JSON.parse(backup).version, 1);
    // Wipe: delete everything, then empty the trash.
    for (const s of await scripts()) await h.internal("scripts.delete", { uuid: s.uuid });
    await h.internal("trash.purge");
    assert.deepEqual(await scripts(), []);
    assert.deepEqual(await onPage([]), []);

    await options.reload();
    // A backup from a newer format version is refused, naming both versions.
    const newer = JSON.stringify({ ...JSON.parse(backup), version: 2 });
    await options.locator("#restore-file").setInputFiles([{ name: "newer.json", mimeType: "application/json", buffer: Buffer.from(newer) }]);
    await options.getByText(/format version 2, newer than the version 1/).waitFor({ timeout: 3000 });
    assert.deepEqual(await scripts(), []);

    await options.locator("#restore-file").setInputFiles([{ name: "backup.json", mimeType: "application/json", buffer: backup }]);
    await options.getByText(/^Restored \d+ script\(s\) from the backup/).waitFor({ timeout: 5000 });
    const after = [];
    for (const s of await scripts()) {
      const { script } = await h.internal("scripts.get", { uuid: s.uuid });
      after.push([script.name, script.enabled, script.source]);
    }
    const sort = (x) => [...x].sort((a, b) => a[0].localeCompare(b[0]));
    assert.deepEqual(sort(after), sort(before));
    assert.deepEqual(await onPage(["ia:v1", "k:v2", "ro:v1", "u:v9"]), ["ia:v1", "k:v2", "ro:v1", "u:v9"], "the disabled one stays off");
  });

  test("options page: delete -> trash -> Restore; History -> Diff -> Restore this version", T, async () => {
    const k = (await scripts()).find((s) => s.name === "Keyboard");
    await h.internal("scripts.save", { uuid: k.uuid, revision: k.revision, source: userscript({ tag: "k", version: "v3", name: "Keyboard" }) });
    await options.reload();
    await options.getByRole("button", { name: "History of Keyboard" }).click();
    await options.getByRole("button", { name: `Show changes of revision ${k.revision}` }).click();
    const diff = await options.locator("#history-diff pre").textContent();
    assert.match(diff, /v2/);
    assert.match(diff, /v3/);
    await options.getByRole("button", { name: `Restore revision ${k.revision}` }).click();
    await options.getByText(/^Restored revision/).waitFor({ timeout: 3000 });
    assert.deepEqual(await onPage(["ia:v1", "k:v2", "ro:v1", "u:v9"]), ["ia:v1", "k:v2", "ro:v1", "u:v9"]);

    await h.internal("scripts.delete", { uuid: k.uuid });
    await options.reload();
    await options.locator("#trash").getByRole("button", { name: "Restore Keyboard" }).click();
    await options.getByText(/^Restored Keyboard/).waitFor({ timeout: 3000 });
    assert.deepEqual(await onPage(["ia:v1", "k:v2", "ro:v1", "u:v9"]), ["ia:v1", "k:v2", "ro:v1", "u:v9"], "back from the trash, it runs");
    for (const scheme of ["light", "dark"]) {
      await options.emulateMedia({ colorScheme: scheme });
      await options.screenshot({ path: `tests/e2e/out/history-${scheme}.png`, fullPage: true });
    }
  });
});
