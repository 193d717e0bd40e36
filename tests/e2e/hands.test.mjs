// The user's own hands, in the real options page and popup: the editor (keyboard only, find,
// problems at their line), import (all or none: a bad file, the storage quota, the worker stopped
// mid-import 20 times), export and restore from the export, the trash (Delete forever, Empty
// trash), the audit of every change by hand as "you", and "Undo" in the popup, each checked on a
// page where the script is seen running.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PROVIDER_ID } from "./lib/harness.mjs";
import { PAGE, markScript, marksOf, registrations, seen, setUp } from "./lib/agent.mjs";
import { show, sleep, until } from "./lib/util.mjs";

const T = { timeout: 90_000 };

const userscript = ({ tag, version, name = `Hands ${tag}`, namespace = "lumo-e2e-hands" }) => markScript({ tag, version, name, namespace });

describe("the user's own hands: editor, import/export, trash and undo", () => {
  let env, h, server, tab, url, options;
  const call = (name, args) => env.tools.ok(name, args);
  const onPage = (expected) => seen(tab, url, expected);
  const scripts = async () => (await h.internal("scripts.list")).scripts;
  const status = () => options.locator("#status").textContent();
  const openOptions = async () => {
    options = await h.context.newPage();
    await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    options.on("dialog", (d) => d.accept());
  };

  before(async () => {
    env = await setUp();
    ({ h, server, tab } = env);
    url = env.url(PAGE);
    await openOptions();
  });
  after(async () => { await env?.close(); });

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

    // A switch already on changes nothing and makes no revision: its row offers no Undo (which
    // would have reverted the agent's earlier write) and says it changed nothing.
    await call("set_script_enabled", { uuid, enabled: true });
    await popup.reload();
    const noop = (await h.internal("audit.list")).entries.findIndex((e) => e.tool === "set_script_enabled" && e.target === uuid);
    assert.equal((await h.internal("audit.list")).entries[noop].unchanged, true);
    const row = popup.locator("#audit > li").nth(noop);
    assert.match(await row.textContent(), /set_script_enabled \(no change\)/);
    assert.equal(await row.getByRole("button", { name: /^Undo/ }).count(), 0, "no Undo for a write that changed nothing");
    assert.equal(await popup.locator("#audit > li").nth(await entryIndex()).getByRole("button", { name: /^Undo/ }).count(), 1, "the write beside it still has one");
    // A try of the stored script is audited "ok" with the script as its target, but it made no
    // version: the worker does not mark it undoable, so its row has no Undo either.
    const tried = await call("try_script", { uuid, url });
    assert.ok(tried.frames?.length > 0, JSON.stringify(tried));
    await popup.reload();
    const tryRow = (await h.internal("audit.list")).entries.findIndex((e) => e.tool === "try_script" && e.target === uuid);
    assert.equal((await h.internal("audit.list")).entries[tryRow].result, "ok");
    assert.match(await popup.locator("#audit > li").nth(tryRow).textContent(), /try_script/);
    assert.equal(await popup.locator("#audit > li").nth(tryRow).getByRole("button", { name: /^Undo/ }).count(), 0, "no Undo for a try");

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

  test("Undo walks back two agent writes, newest first: the older one is undone once the newer one was", T, async () => {
    // What the page runs besides this test's script (the file's earlier tests leave theirs).
    await tab.goto(url, { waitUntil: "load" });
    const others = (await marksOf(tab)).filter((m) => !m.startsWith("chain:"));
    const runs = (v) => onPage([...others, `chain:${v}`].sort());
    // The user's version, then two writes by the agent.
    const { uuid } = (await h.internal("scripts.save", { source: userscript({ tag: "chain", version: "mine" }) })).result.script;
    try {
      await call("write_script", { uuid, revision: 1, source: userscript({ tag: "chain", version: "evil" }) });
      await call("write_script", { uuid, revision: 2, source: userscript({ tag: "chain", version: "evil2" }) });
      const writes = (await h.internal("audit.list")).entries.filter((e) => e.tool === "write_script" && e.target === uuid && e.result === "ok");
      const [second, first] = writes; // newest first
      const undo = (e) => h.internal("scripts.undo", { uuid, caller: e.caller, at: e.at });
      await undo(second);
      assert.deepEqual(await runs("evil"), [...others, "chain:evil"].sort());
      // The script is as the first write left it (a new revision, the same source): undoing that
      // write now brings back the user's version. Before, it was refused as "changed since".
      await undo(first);
      assert.deepEqual(await runs("mine"), [...others, "chain:mine"].sort());
      // Undone already, the first write is no longer as it left the script: refused, nothing
      // overwritten.
      await assert.rejects(undo(first), /changed since that write/);
      assert.deepEqual(await runs("mine"), [...others, "chain:mine"].sort());
    } finally {
      await h.internal("scripts.delete", { uuid });
    }
  });

  test("an agent write that landed as the worker stopped is recorded INTERRUPTED with its revision, and Undo brings back the version before it", { timeout: 180_000 }, async () => {
    await tab.goto(url, { waitUntil: "load" });
    const others = (await marksOf(tab)).filter((m) => !m.startsWith("cut:"));
    const runs = (v) => onPage([...others, `cut:${v}`].sort());
    // A big source, so the worker can be stopped between the write's one `set` and its entry.
    const source = (v) => `${userscript({ tag: "cut", version: v })}// ${"x".repeat(200_000)}\n`;
    const { uuid } = (await call("write_script", { source: source("v0") })).script;
    const stored = async () => (await call("get_script", { uuid })).script;
    const provider = await h.providerPage();
    const host = await h.hostPage();
    let landed = null;
    try {
      for (let i = 0; i < 30 && !landed; i++) {
        const before = (await stored()).revision;
        await host.evaluate(([sess, args]) => { window.__w = window.lumo.callTool(sess, "write_script", args).catch(() => null); },
          [env.session, { uuid, revision: before, source: source(`a${i}`) }]);
        // The window between the write's `set` and its entry is as long as Chrome's registration
        // takes, which differs from machine to machine: the stop comes at times spread over it.
        await sleep(20 + ((i * 37) % 280));
        await h.stopProviderWorker();
        await host.evaluate(() => window.__w);
        const pending = (await provider.evaluate(() => chrome.storage.local.get("audit/pending")))["audit/pending"] ?? {};
        const now = (await stored()).revision; // restarts the worker
        if (now === before + 1 && Object.keys(pending).length > 0) landed = { before, now };
      }
      assert.ok(landed, "no write was caught between its set and its entry in 30 tries");
      const list = await until(() => h.internal("audit.list"),
        (l) => l.entries.some((e) => e.target === uuid && e.result === "INTERRUPTED"), 10_000);
      const at = list.entries.findIndex((e) => e.target === uuid && e.result === "INTERRUPTED");
      const entry = list.entries[at];
      // Before, it had no revision and no Undo: the write had landed all the same.
      assert.equal(entry?.revision, landed.now, show(entry));
      assert.ok(list.undoable.includes(at), "the popup offers its Undo");
      await h.internal("scripts.undo", { uuid, caller: entry.caller, at: entry.at });
      const back = await stored();
      assert.equal(back.revision, landed.now + 1);
      const was = /dataset\.v = "([^"]+)"/.exec((await call("get_script", { uuid, revision: landed.before })).script.source)[1];
      assert.deepEqual(await runs(was), [...others, `cut:${was}`].sort(), "the page runs the version before the cut write");
    } finally {
      await h.internal("scripts.delete", { uuid });
    }
  });

  test("the user creates and edits a script in the options page with the keyboard only, and it runs", T, async () => {
    // The editor is CodeMirror 6 (dist/codemirror.js); everything below goes through the keyboard
    // and reads what CodeMirror shows (its lines, gutters, search panel), not our own state.
    await options.reload();
    await options.locator("#editor-new").focus();
    await options.keyboard.press("Enter");
    await options.locator("#editor-text .cm-content").waitFor();
    const inEditor = () => options.evaluate(() => !!document.activeElement?.matches("#editor-text .cm-content"));
    const text = () => options.locator("#editor-text .cm-line").allTextContents().then((l) => l.join("\n"));
    assert.ok(await inEditor(), "the editor has the focus");
    await options.keyboard.press("Control+A");
    await options.keyboard.press("Delete");
    const lines = userscript({ tag: "k", version: "v1", name: "Keyboard" }).split("\n");
    for (const line of lines.slice(0, -1)) {
      await options.keyboard.type(line.trimStart()); // the editor indents after Enter
      await options.keyboard.press("Enter");
    }
    assert.match(await text(), /\n  mark\.dataset\.v = "v1";\n/, "typed text, indented by the editor");
    await options.keyboard.press("Control+s");
    await options.getByText(/^Saved Keyboard/).waitFor({ timeout: 3000 });
    assert.deepEqual(await onPage(["k:v1", "u:v4"]), ["k:v1", "u:v4"], "the new script runs");

    // Edit: find "v1" (Ctrl+F, type, Enter), Escape back to the text with the match selected, type over it.
    await options.keyboard.press("Control+f");
    assert.ok(await options.evaluate(() => !!document.activeElement?.matches("#editor-text .cm-search input[name=search]")), "Ctrl+F opens the search panel");
    await options.keyboard.type('"v1"');
    const count = options.locator("#editor-text .cm-search .cm-search-count");
    const counted = async (want) => { await options.waitForFunction((w) => document.querySelector("#editor-text .cm-search-count")?.textContent === w, want, { timeout: 3000 }).catch(() => {}); return count.textContent(); };
    assert.equal(await counted("1 match"), "1 match", "the panel counts the matches");
    await options.keyboard.press("Enter");
    assert.equal(await options.locator("#editor-text .cm-searchMatch-selected").textContent({ timeout: 3000 }), '"v1"');
    assert.equal(await counted("1 of 1"), "1 of 1");
    await options.keyboard.press("Escape");
    assert.ok(await inEditor(), "Escape returns to the text");
    await options.keyboard.type('"v2"');
    // Tab indents (the whole line, two spaces) and keeps the focus; Escape then Tab leaves the editor.
    const before = (await text()).split("\n").find((l) => l.includes('"v2"'));
    await options.keyboard.press("Tab");
    assert.ok(await inEditor(), "Tab stays in the editor");
    assert.equal((await text()).split("\n").find((l) => l.includes('"v2"')), `  ${before}`, "Tab indented the line");
    await options.keyboard.press("Escape");
    await options.keyboard.press("Tab");
    assert.ok(!(await inEditor()), "Escape, Tab leaves the editor (no keyboard trap)");
    await options.keyboard.press("Shift+Tab");
    assert.ok(await inEditor(), "Shift+Tab comes back");
    await options.keyboard.press("Control+s");
    await options.getByText(/^Saved Keyboard \(revision 2\)/).waitFor({ timeout: 3000 });
    assert.deepEqual(await onPage(["k:v2", "u:v4"]), ["k:v2", "u:v4"], "the edited script runs");
    const s = (await scripts()).find((x) => x.name === "Keyboard");
    assert.equal(s.createdBy, "user");
    const saved = (await h.internal("scripts.get", { uuid: s.uuid })).script.source;
    assert.equal(saved, await text(), "the saved source is what the editor shows");
    assert.match(saved, /\n    mark\.dataset\.v = "v2";\n/, "Tab indented by two spaces");

    // Metadata errors show at their line: a new line 2, marked in the lint gutter beside "2".
    await options.keyboard.press("Control+Home");
    await options.keyboard.press("End");
    await options.keyboard.press("Enter");
    await options.keyboard.type("// @match nope");
    await options.locator("#editor-diagnostics li.error").first().waitFor({ timeout: 3000 });
    assert.match(await options.locator("#editor-diagnostics").textContent(), /line 2 error/);
    const marker = options.locator("#editor-text .cm-lint-marker-error").first();
    await marker.waitFor({ timeout: 3000 });
    const lineNo = options.locator("#editor-text .cm-lineNumbers .cm-gutterElement", { hasText: /^2$/ });
    const [mb, lb] = [await marker.boundingBox({ timeout: 3000 }), await lineNo.boundingBox({ timeout: 3000 })];
    assert.ok(Math.abs(mb.y + mb.height / 2 - (lb.y + lb.height / 2)) < lb.height / 2, `the gutter marks line 2 (${JSON.stringify([mb, lb])})`);
    assert.equal(await options.locator("#editor-text .cm-line").nth(1).locator(".cm-lintRange-error").count(), 1, "line 2 is underlined");
    assert.equal(await options.locator("#editor-text .cm-lintRange-error").count(), 1, "and only line 2");

    // Find, with the keyboard: Ctrl+F, type, Enter / Shift+Enter step through the matches (wrapping), Escape returns.
    const at = async () => JSON.stringify(await options.locator("#editor-text .cm-searchMatch-selected").boundingBox({ timeout: 3000 }));
    await options.keyboard.press("Control+f");
    await options.keyboard.press("Control+A");
    await options.keyboard.type("DATASET");
    assert.equal(await options.locator("#editor-text .cm-searchMatch, #editor-text .cm-searchMatch-selected").count(), 2, "both matches highlighted (case-insensitive)");
    assert.equal(await counted("2 matches"), "2 matches");
    await options.keyboard.press("Enter");
    const first = await at();
    assert.equal(await options.locator("#editor-text .cm-searchMatch-selected").textContent({ timeout: 3000 }), "dataset");
    assert.equal(await counted("1 of 2"), "1 of 2", "n of m: the first match selected");
    await options.keyboard.press("Enter");
    const second = await at();
    assert.notEqual(second, first);
    assert.equal(await counted("2 of 2"), "2 of 2");
    await options.keyboard.press("Enter");
    assert.equal(await at(), first, "wraps to the first");
    assert.equal(await counted("1 of 2"), "1 of 2", "the count wraps with it");
    await options.keyboard.press("Shift+Enter");
    assert.equal(await at(), second, "Shift+Enter goes back");
    assert.equal(await counted("2 of 2"), "2 of 2");
    await options.keyboard.press("Escape");
    assert.ok(await inEditor(), "Escape returns to the text");
    assert.equal(await options.evaluate(() => getSelection().toString()), "dataset", "with the match selected");
    await options.keyboard.press("Control+f");
    await options.keyboard.press("Control+A");
    await options.keyboard.type("no such text");
    assert.equal(await options.locator("#editor-text .cm-searchMatch").count(), 0, "no match, nothing highlighted");
    assert.equal(await counted("no matches"), "no matches");
    await options.keyboard.press("Control+A");
    await options.keyboard.type("dataset");
    for (const scheme of ["light", "dark"]) {
      await options.emulateMedia({ colorScheme: scheme });
      await options.locator("#editor-section").screenshot({ path: `tests/e2e/out/editor-${scheme}.png` });
    }
    await options.emulateMedia({ colorScheme: "light" });
    await options.keyboard.press("Escape");
  });

  test("the editor keeps a script's \\r\\n line breaks, and unsaved text is dropped only when the user says so", T, async () => {
    const crlf = userscript({ tag: "crlf", version: "v1", name: "CRLF hands" }).replace(/\n/g, "\r\n");
    const made = await h.internal("scripts.save", { source: crlf });
    const { uuid } = made.result.script;
    const page = await h.context.newPage();
    const dialogs = [];
    let answer = false;
    page.on("dialog", (d) => { dialogs.push([d.type(), d.message()]); return answer ? d.accept() : d.dismiss(); });
    try {
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      await page.getByRole("button", { name: "Edit CRLF hands", exact: true }).click();
      await page.locator("#editor-text .cm-content").waitFor();
      // Saved unchanged: nothing is stored (CodeMirror holds \n; the page gives the \r\n back).
      await page.click("#editor-save");
      await page.getByText(/^Nothing to save: CRLF hands is already this text \(revision 1\)/).waitFor({ timeout: 3000 });
      assert.equal((await h.internal("scripts.get", { uuid })).script.revision, 1);
      // Edited: the edit alone changes, every line break still \r\n.
      await page.locator("#editor-text .cm-content").click();
      await page.keyboard.press("Control+End");
      await page.keyboard.type("// edited");
      await page.click("#editor-save");
      await page.getByText(/^Saved CRLF hands \(revision 2\)/).waitFor({ timeout: 3000 });
      const stored = (await h.internal("scripts.get", { uuid })).script.source;
      assert.equal(stored, `${crlf}// edited`);
      assert.equal(dialogs.length, 0, "nothing unsaved, nothing asked");
      // Unsaved text: New script asks, and Cancel keeps the text.
      await page.locator("#editor-text .cm-content").click();
      await page.keyboard.press("Control+End");
      await page.keyboard.type("// not saved");
      await page.click("#editor-new");
      assert.deepEqual(dialogs.shift(), ["confirm", "Discard your unsaved changes to CRLF hands?"]);
      assert.match(await page.locator("#editor-title").textContent(), /^Edit CRLF hands/);
      assert.match(await page.locator("#editor-text .cm-content").textContent(), /\/\/ not saved/);
      // Close asks too; OK closes.
      answer = true;
      await page.click("#editor-close");
      assert.deepEqual(dialogs.shift(), ["confirm", "Discard your unsaved changes to CRLF hands?"]);
      assert.equal(await page.locator("#editor-section").isHidden(), true);
      assert.equal((await h.internal("scripts.get", { uuid })).script.revision, 2, "nothing was saved");
      // Leaving the page with unsaved text: the browser asks first.
      answer = false;
      await page.getByRole("button", { name: "Edit CRLF hands", exact: true }).click();
      await page.locator("#editor-text .cm-content").click();
      await page.keyboard.type("x");
      await page.close({ runBeforeUnload: true });
      const asked = await until(async () => dialogs, (d) => d.length > 0, 3000);
      assert.equal(asked[0][0], "beforeunload");
    } finally {
      answer = true;
      if (!page.isClosed()) await page.close();
      await h.internal("scripts.delete", { uuid }).catch(() => {});
    }
  });

  // A tester's pointer rested on one script's switch while an agent's write listed another
  // above it: the click turned the newcomer off. A switch whose row moved takes no click for a
  // moment (as the callers' buttons and the popup's Undo), while the keyboard (above) goes on.
  test("a script's switch that moved under the pointer takes no click for a moment", T, async () => {
    const other = (await call("write_script", { source: userscript({ tag: "rr-o", version: "v1", name: "Race other" }) })).script.uuid;
    await call("set_script_enabled", { uuid: other, enabled: false });
    const page = await h.context.newPage();
    const made = [other];
    try {
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      const target = page.getByRole("switch", { name: "Enabled: Race other", exact: true });
      await target.hover(); // waits until it is armed and still
      const box = await target.boundingBox();
      made.push((await call("write_script", { source: userscript({ tag: "rr-n", version: "v1", name: "Race newcomer" }) })).script.uuid);
      const moved = page.getByRole("switch", { name: "Enabled: Race newcomer", exact: true });
      await until(async () => JSON.stringify(await moved.boundingBox()) === JSON.stringify(box) || (await target.boundingBox())?.y !== box.y, (v) => v, 3000);
      const under = await page.evaluate(([x, y]) => document.elementFromPoint(x, y)?.getAttribute("aria-label"), [box.x + box.width / 2, box.y + box.height / 2]);
      await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
      await sleep(300);
      const state = async () => Object.fromEntries((await scripts()).filter((x) => made.includes(x.uuid)).map((x) => [x.name, x.enabled]));
      assert.notEqual(under, "Enabled: Race other", "the list moved under the pointer");
      assert.deepEqual(await state(), { "Race other": false, "Race newcomer": true }, `the click landed on ${under} and changed nothing`);
      // A moment later a click is taken again.
      await sleep(900);
      await target.click();
      await until(state, (v) => v["Race other"] === true, 5000);
      assert.deepEqual(await state(), { "Race other": true, "Race newcomer": true });
    } finally {
      await page.close();
      for (const uuid of made) await h.internal("scripts.delete", { uuid }).catch(() => {});
    }
  });

  test("the keyboard keeps its place in the list: Space on a switch twice toggles twice; Delete's question and the next row take the focus", T, async () => {
    const made = [];
    for (const name of ["Focus one", "Focus two"]) made.push((await h.internal("scripts.save", { source: userscript({ tag: name.replace(" ", "-"), version: "v1", name }) })).result.script.uuid);
    const page = await h.context.newPage();
    try {
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      const focused = () => page.evaluate(() => document.activeElement?.getAttribute("aria-label") ?? document.activeElement?.textContent ?? document.activeElement?.tagName);
      const enabled = async (uuid) => (await h.internal("scripts.get", { uuid })).script.enabled;
      const sw = page.getByRole("switch", { name: "Enabled: Focus one", exact: true });
      await sw.focus();
      await page.keyboard.press("Space");
      await until(() => enabled(made[0]), (v) => v === false, 5000);
      // The row is rebuilt with the new state; the focus is on its switch, not on the page.
      await until(focused, (f) => f === "Enabled: Focus one", 3000);
      assert.equal(await focused(), "Enabled: Focus one");
      await page.keyboard.press("Space");
      assert.equal(await until(() => enabled(made[0]), (v) => v === true, 5000), true, "the second Space toggled it back");
      // Delete asks where Delete was, and the question has the focus (armed a moment later).
      await page.getByRole("button", { name: "Delete Focus one", exact: true }).focus();
      await page.keyboard.press("Enter");
      await until(focused, (f) => f === "Confirm delete of Focus one", 3000);
      assert.equal(await focused(), "Confirm delete of Focus one");
      await page.keyboard.press("Enter");
      await sleep(300);
      assert.ok((await scripts()).some((x) => x.uuid === made[0]), "an Enter before it is armed deletes nothing");
      await sleep(1000);
      await page.keyboard.press("Enter");
      await until(async () => (await scripts()).some((x) => x.uuid === made[0]), (v) => v === false, 5000);
      // The row went; the focus is in the row now in its place.
      const next = await until(focused, (f) => typeof f === "string" && f.startsWith("Enabled: "), 3000);
      assert.match(next, /^Enabled: /, `focus after the delete: ${next}`);
    } finally {
      await page.close();
      for (const uuid of made) await h.internal("scripts.delete", { uuid }).catch(() => {});
    }
  });

  test("read-only mode stops the agent but not the user's own edits", T, async () => {
    await h.internal("policy.setSwitch", { name: "writes", value: false });
    try {
      const res = await env.tools.call("write_script", { source: userscript({ tag: "ro", version: "v1" }) });
      assert.equal(res.structuredContent?.error_code, "WRITE_DISABLED");
      const r = await h.internal("scripts.save", { source: userscript({ tag: "ro", version: "v1" }) });
      assert.equal(r.result.script.createdBy, "user");
    } finally {
      await h.internal("policy.setSwitch", { name: "writes", value: true });
    }
  });

  test("import three .user.js files, one a duplicate (asked, replaced); a 50 MB file and a non-userscript are refused unread, a file not UTF-8 refused", T, async () => {
    await options.reload();
    const files = [
      { name: "a.user.js", mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: "ia", version: "v1", name: "Imported A" })) },
      { name: "b.user.js", mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: "ib", version: "v1", name: "Imported B" })) },
      { name: "u.user.js", mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: "u", version: "v9" })) }, // same @namespace + @name as "Hands u"
    ];
    await options.locator("#import-files").setInputFiles(files);
    // Shown first, nothing stored yet; the duplicate is offered for replacing, ticked.
    const review = options.locator("#import-review");
    await review.waitFor({ state: "visible", timeout: 5000 });
    assert.equal(await options.locator("#import-review-title").textContent(), "Import 3 scripts?");
    assert.equal(await review.getByRole("checkbox", { name: /Replace your script Hands u/ }).isChecked(), true);
    assert.equal((await scripts()).filter((s) => s.name.startsWith("Imported")).length, 0, "nothing stored before the user confirms");
    await options.locator("#import-review-ok").click();
    await options.getByText(/u\.user\.js: replaced/).waitFor({ timeout: 5000 });
    // A line per file under the import box; one line of summary in the status above the page.
    assert.deepEqual(await options.getByRole("list", { name: "Last import" }).getByRole("listitem").allTextContents(),
      ["a.user.js: imported as Imported A", "b.user.js: imported as Imported B", "u.user.js: replaced as Hands u"]);
    assert.equal(await status(), "2 imported, 1 replaced. Each file is listed under the import box.");
    const names = (await scripts()).map((s) => s.name).sort();
    assert.deepEqual(names.filter((n) => n.startsWith("Imported")), ["Imported A", "Imported B"]);
    assert.equal(names.filter((n) => n === "Hands u").length, 1, "the duplicate replaced, not added");
    assert.deepEqual(await onPage(["ia:v1", "ib:v1", "k:v2", "ro:v1", "u:v9"]), ["ia:v1", "ib:v1", "k:v2", "ro:v1", "u:v9"]);
    // One audit entry stands for the three: the popup says how many it wrote.
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    const entry = popup.locator("#audit > li", { hasText: "import_scripts" }).first();
    await entry.waitFor({ timeout: 3000 });
    assert.match(await entry.textContent(), /^ok import_scripts \(3 scripts\)/);
    await popup.close();

    const { writeFileSync, mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(`${tmpdir()}/lumo-hands-`);
    try {
      const huge = `${dir}/huge.user.js`;
      writeFileSync(huge, Buffer.alloc(50 * 1024 * 1024, 0x20));
      await options.locator("#import-files").setInputFiles(huge);
      await options.getByText(/huge\.user\.js: refused, \d+ bytes is over/).waitFor({ timeout: 10_000 });
    } finally {
      rmSync(dir, { recursive: true, force: true }); // 50 MB, each run
    }
    await options.locator("#import-files").setInputFiles([{ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("hello") }]);
    await options.getByText(/notes\.txt: refused, not a userscript/).waitFor({ timeout: 3000 });
    // Not UTF-8 (a Latin-1 "é"): refused, not stored with a replacement character in its place.
    const latin1 = Buffer.concat([Buffer.from(userscript({ tag: "l1", version: "v1", name: "Latin one" })), Buffer.from([0x2f, 0x2f, 0x20, 0xe9, 0x0a])]);
    await options.locator("#import-files").setInputFiles([{ name: "latin1.user.js", mimeType: "text/javascript", buffer: latin1 }]);
    await options.getByText(/latin1\.user\.js: refused, not UTF-8 text/).waitFor({ timeout: 3000 });
    assert.equal((await scripts()).filter((s) => s.name === "Latin one").length, 0);
    // Another manager's zip backup: said to be an archive, not "not UTF-8" (R17).
    const zip = Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]), Buffer.alloc(40, 0x81)]);
    await options.locator("#import-files").setInputFiles([{ name: "vm-export.zip", mimeType: "application/zip", buffer: zip }]);
    await options.getByText("vm-export.zip: refused, a .zip archive (another manager's backup?), which is not read: unzip it and import the .user.js files inside", { exact: true }).waitFor({ timeout: 3000 });
    await options.locator("#restore-file").setInputFiles([{ name: "vm-export.zip", mimeType: "application/zip", buffer: zip }]);
    await options.locator("#status").getByText(/^Backup not restored: the file is a \.zip archive/).waitFor({ timeout: 3000 });
  });

  test("when a script runs and in which frames are shown in the import's confirmation and the options list, as Chrome is given them", T, async () => {
    await options.reload();
    const header = (name, extra) => [
      "// ==UserScript==", `// @name         ${name}`, "// @namespace    lumo-e2e-hands-when",
      "// @match        http://when.test/*", ...extra, "// ==/UserScript==", "1;", "",
    ].join("\n");
    const early = "When early";
    const plain = "When plain";
    // Tampermonkey's action run from its context menu: refused (here it would run on every
    // page load unasked), the whole import with it, and the file's line says why.
    const menu = header("When menu", ["// @run-at       context-menu"]);
    await options.locator("#import-files").setInputFiles([
      { name: "menu.user.js", mimeType: "text/javascript", buffer: Buffer.from(menu) },
      { name: "plain.user.js", mimeType: "text/javascript", buffer: Buffer.from(header(plain, [])) },
    ]);
    await options.getByText(/^Nothing imported: [^]*menu\.user\.js[^]*context-menu is not available/).waitFor({ timeout: 5000 });
    assert.equal((await scripts()).filter((s) => s.name === "When menu" || s.name === plain).length, 0);
    await options.locator("#import-files").setInputFiles([
      { name: "early.user.js", mimeType: "text/javascript", buffer: Buffer.from(header(early, ["// @run-at       document-start", "// @noframes"])) },
      // Its requests would all be refused: the editor's warning is shown before it is stored.
      { name: "plain.user.js", mimeType: "text/javascript", buffer: Buffer.from(header(plain, ["// @grant        GM_xmlhttpRequest"])) },
    ]);
    const review = options.locator("#import-review");
    await review.waitFor({ state: "visible", timeout: 5000 });
    const item = (name) => options.locator("#import-review-list > li", { hasText: name });
    const earlyShown = await item(early).textContent();
    assert.ok(earlyShown.includes("@run-at document-start") && earlyShown.includes("@noframes (top frame only)"), earlyShown);
    assert.ok(!earlyShown.includes("Warnings:"), earlyShown);
    const plainShown = await item(plain).textContent();
    assert.ok(!plainShown.includes("@run-at") && !plainShown.includes("@noframes"), plainShown);
    assert.match(plainShown, /Warnings:\s*line 5: [^]*@connect/, plainShown);
    await options.locator("#import-review-ok").click();
    await options.getByText(/early\.user\.js: imported/).waitFor({ timeout: 5000 });

    const stored = (await scripts()).filter((s) => s.name === early || s.name === plain);
    assert.equal(stored.length, 2);
    const chrome = await registrations(h);
    for (const s of stored) {
      const reg = chrome.find((r) => r.id === s.uuid);
      assert.ok(reg, `${s.name} is registered`);
      const row = options.locator(`.script-row[data-uuid="${s.uuid}"]`);
      await row.waitFor({ timeout: 5000 });
      const shown = await row.textContent();
      // What the page says is what Chrome holds: its runAt and allFrames, not the model's.
      assert.equal(shown.includes("@run-at document-start"), reg.runAt === "document_start", `${s.name}: ${reg.runAt} vs ${shown}`);
      assert.equal(shown.includes("@noframes (top frame only)"), reg.allFrames === false, `${s.name}: allFrames ${reg.allFrames} vs ${shown}`);
      assert.equal(s.noframes, reg.allFrames === false, "and scripts.list says so to the page");
    }
    assert.equal(chrome.find((r) => r.id === stored.find((s) => s.name === early).uuid).runAt, "document_start");
    const listed = (await env.tools.listed({ limit: 100 })).find((s) => s.name === early);
    assert.equal(listed.noframes, true, "list_scripts tells the agent too");
    assert.equal(listed.runAt, "document_start");
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
    const newer = JSON.stringify({ ...JSON.parse(backup), version: 3 });
    await options.locator("#restore-file").setInputFiles([{ name: "newer.json", mimeType: "application/json", buffer: Buffer.from(newer) }]);
    await options.getByText(/format version 3, newer than version 2/).waitFor({ timeout: 3000 });
    assert.deepEqual(await scripts(), []);

    await options.locator("#restore-file").setInputFiles([{ name: "backup.json", mimeType: "application/json", buffer: backup }]);
    await options.locator("#import-review-ok").click();
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

    // History read while the script was live; it is deleted before the click (the page does not
    // re-read it). "Restore this version" must not bring it out of the trash; the History then
    // shows it in the trash, and its restore does bring it back.
    await options.getByRole("button", { name: "History of Keyboard" }).first().click();
    await options.getByText(/^History of Keyboard$/).waitFor({ timeout: 3000 });
    await h.internal("scripts.delete", { uuid: k.uuid });
    await options.getByRole("button", { name: `Restore revision ${k.revision}` }).click();
    await options.getByText(/^Not restored: .*in the trash/).waitFor({ timeout: 3000 });
    assert.equal((await h.internal("scripts.revisions", { uuid: k.uuid })).deleted, true, "still in the trash");
    assert.deepEqual(await onPage(["ia:v1", "ro:v1", "u:v9"]), ["ia:v1", "ro:v1", "u:v9"], "and not running");
    await options.getByText(/^History of Keyboard \(in the trash\)$/).waitFor({ timeout: 3000 });
    await options.getByRole("button", { name: `Restore revision ${k.revision}` }).click();
    await options.getByText(/^Restored revision/).waitFor({ timeout: 3000 });
    assert.deepEqual(await onPage(["ia:v1", "k:v2", "ro:v1", "u:v9"]), ["ia:v1", "k:v2", "ro:v1", "u:v9"], "restored from the History of a trashed script");
    for (const scheme of ["light", "dark"]) {
      await options.emulateMedia({ colorScheme: scheme });
      await options.screenshot({ path: `tests/e2e/out/history-${scheme}.png`, fullPage: true });
    }
  });
  test("Edit, History and Runs open below the list, and each is brought into view with the keyboard focus in it", T, async () => {
    await options.setViewportSize({ width: 900, height: 420 });
    await options.reload();
    for (const [button, section] of [["Edit Keyboard", "editor-section"], ["History of Keyboard", "history-section"], ["Runs of Keyboard", "runs-section"]]) {
      await options.evaluate(() => window.scrollTo(0, 0));
      await options.getByRole("button", { name: button, exact: true }).first().click();
      const where = await until(() => options.evaluate((id) => {
        const s = document.getElementById(id);
        return { hidden: s.hidden, top: Math.round(s.getBoundingClientRect().top), focus: s.contains(document.activeElement) };
      }, section), (w) => !w.hidden && w.top >= 0 && w.top < 60 && w.focus, 3000);
      assert.ok(!where.hidden && where.top >= 0 && where.top < 60 && where.focus, `${button}: ${section} at the top of the view, focus in it: ${JSON.stringify(where)}`);
    }
    await options.setViewportSize({ width: 1280, height: 720 });
  });

  test("the options page's switch, Delete and Delete forever are audited as \"you\" (popup) and kept in history", T, async () => {
    await h.internal("scripts.save", { source: userscript({ tag: "sw", version: "v1", name: "Switched" }) });
    const sw = (await scripts()).find((s) => s.name === "Switched");
    await options.reload();
    await options.getByRole("switch", { name: "Enabled: Switched" }).click();
    await options.getByText("Disabled Switched.").waitFor({ timeout: 3000 });
    await options.getByRole("button", { name: "Delete Switched" }).click();
    await options.getByRole("button", { name: "Confirm delete of Switched" }).click();
    await options.getByText("Deleted Switched.").waitFor({ timeout: 3000 });
    const hist = await h.internal("scripts.revisions", { uuid: sw.uuid });
    assert.equal(hist.deleted, true);
    assert.ok(hist.revisions.some((r) => r.revision === 2 && r.enabled === false && r.by === "user" && r.via === "options page"), JSON.stringify(hist.revisions));
    await options.reload();
    await options.locator("#trash").getByRole("button", { name: "Delete Switched forever" }).click();
    await options.getByText("Deleted Switched forever.").waitFor({ timeout: 3000 });
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    const entries = (await h.internal("audit.list")).entries.filter((e) => e.target === sw.uuid && e.caller === "user");
    assert.deepEqual(entries.map((e) => `${e.tool} ${e.result}`).reverse(),
      ["write_script ok", "set_script_enabled ok", "delete_script ok", "purge_trash ok"]);
    for (const tool of ["set_script_enabled", "delete_script", "purge_trash"]) {
      const li = popup.locator("#audit > li", { hasText: tool }).filter({ hasText: sw.uuid.slice(0, 8) });
      await li.first().waitFor({ timeout: 3000 });
      assert.match(await li.first().textContent(), /you/, `${tool} is shown as the user's`);
    }
    await popup.close();
    // "Empty trash": everything in it goes for good, audited once.
    const e = (await h.internal("scripts.save", { source: userscript({ tag: "em", version: "v1", name: "Emptied" }) })).result.script;
    await h.internal("scripts.delete", { uuid: e.uuid });
    await options.reload();
    await options.locator("#trash").getByText("Emptied").waitFor({ timeout: 3000 });
    // An agent deletes another script while the user reads the confirm dialog: it was not in
    // the list the user confirmed, so it stays in the trash.
    const late = (await h.internal("scripts.save", { source: userscript({ tag: "lt", version: "v1", name: "Late" }) })).result.script;
    options.removeAllListeners("dialog");
    let asked = "";
    options.once("dialog", async (d) => {
      asked = d.message();
      try { await env.tools.ok("delete_script", { uuid: late.uuid }); } finally { await d.accept(); }
    });
    await options.locator("#trash-empty").click();
    await options.getByText(/^Deleted 1 script\(s\) forever/).waitFor({ timeout: 5000 });
    options.on("dialog", (d) => d.accept());
    assert.match(asked, /The 1 script listed/);
    await options.locator("#trash").getByText("Late").waitFor({ timeout: 3000 });
    assert.deepEqual((await h.internal("trash.list")).scripts.map((t) => t.name), ["Late"], "the later delete stays in the trash");
    await h.internal("trash.purge", { uuids: [late.uuid] });
    await options.locator("#trash").getByText("The trash is empty.").waitFor({ timeout: 3000 });
    assert.equal(await options.locator("#trash-empty").isDisabled(), true, "an empty trash has nothing to empty");
    const left = await options.evaluate(async (u) => Object.keys(await chrome.storage.local.get(null)).filter((k) => k.includes(u)), e.uuid);
    assert.deepEqual(left, [], "nothing of it is left in storage");
    // Newest first: Late's Delete forever, then the Empty trash, each naming the script it
    // took (the log is all that is left of it), and the popup shows the name.
    const [forever, emptied] = (await h.internal("audit.list")).entries;
    assert.deepEqual([forever.tool, forever.caller, forever.result, forever.target, forever.purged],
      ["purge_trash", "user", "ok", late.uuid, { name: "Late", why: "deletedForever" }]);
    assert.deepEqual([emptied.tool, emptied.caller, emptied.result, emptied.target, emptied.purged],
      ["purge_trash", "user", "ok", e.uuid, { name: "Emptied", why: "deletedForever" }]);
    const shown = await h.context.newPage();
    await shown.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    const row = shown.locator("#audit > li", { hasText: "purge_trash" }).filter({ hasText: e.uuid.slice(0, 8) });
    await row.first().waitFor({ timeout: 3000 });
    assert.match(await row.first().textContent(), /“Emptied” left the trash for good: Delete forever or Empty trash/);
    await shown.close();
  });

  // The trash deletes a script for good once its 30 days are over: before, nothing recorded
  // it. The popup's audit shows the entry as the provider's own, naming the script (its name
  // written by an agent, shown as text), never its source.
  test("a script whose 30 days in the trash are over leaves it with an audit entry the popup shows by name", T, async () => {
    const w = await call("write_script", { source: userscript({ tag: "xp", version: "v1", name: "Long gone <b>helper</b>" }) });
    const uuid = w.script.uuid;
    await call("delete_script", { uuid });
    // A fresh worker finds it expired. Stopped before the change, not after: the open page
    // lists the trash again when storage changes, and a worker stopped mid-purge leaves its
    // entry INTERRUPTED (as it should: seen under load).
    await h.stopProviderWorker();
    // 31 days ago, as the trash's list and the script's trashed copy record it.
    await options.evaluate(async (u) => {
      const ago = Date.now() - 31 * 24 * 3600 * 1000;
      const got = await chrome.storage.local.get(["trash/index", `trash/${u}`]);
      const index = got["trash/index"];
      for (const item of index.items) if (item.uuid === u) item.deletedAt = ago;
      await chrome.storage.local.set({ "trash/index": index, [`trash/${u}`]: { ...got[`trash/${u}`], deletedAt: ago } });
    }, uuid);
    await options.reload(); // lists the trash: what expired goes now (if the change's own listing did not)
    await options.locator("#trash").getByText("The trash is empty.").waitFor({ timeout: 5000 });
    // The listing hides what expired at once; the audited purge runs beside it: waited for.
    const left = () => options.evaluate(() => chrome.storage.local.get(null));
    const purged = async () => (await h.internal("audit.list")).entries.filter((e) => e.target === uuid && e.tool === "purge_trash");
    const ownKeys = (all) => Object.keys(all).filter((k) => k.includes(uuid) && !k.startsWith("audit"));
    const stored = await until(left, (all) => ownKeys(all).length === 0, 5000);
    assert.deepEqual(ownKeys(stored), [], "gone for good");
    const mine = await until(purged, (m) => m.length > 0, 5000);
    assert.deepEqual(mine.map((e) => [e.caller, e.result, e.purged?.why]), [["lumo", "ok", "expired"]]);
    const audit = JSON.stringify(Object.entries(await left()).filter(([k]) => k.startsWith("audit")));
    assert.ok(audit.includes(uuid) && !audit.includes("lumo-mark"), "the audit holds the entry, not the source");
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    const row = popup.locator("#audit > li", { hasText: "purge_trash" }).filter({ hasText: uuid.slice(0, 8) });
    await row.first().waitFor({ timeout: 3000 });
    const text = await row.first().textContent();
    assert.match(text, /“Long gone <b>helper<\/b>” left the trash for good/, text);
    assert.match(text, /30 days in the trash were over/, text);
    assert.match(text, /Lumo, by itself/, text);
    assert.equal(await row.first().locator("b").count(), 0, "the name is text, not markup");
    assert.equal(await row.first().getByRole("button", { name: /^Undo/ }).count(), 0, "nothing to undo");
    await popup.close();
  });

  // "Delete forever" with the worker stopped under it, at a later moment each round: a script
  // gone for good always has its entry (ok, or INTERRUPTED when the stop came after the purge's
  // `set` and before its result was recorded); one still in the trash has none that says "ok".
  test("the worker stopped mid Delete forever, 12 times: every script gone for good has its audit entry", T, async () => {
    const problems = [];
    const outcomes = [];
    const pp = await h.providerPage();
    for (let i = 0; i < 12; i++) {
      const s = (await h.internal("scripts.save", { source: userscript({ tag: `df${i}`, version: "v1", name: `Stopped purge ${i}` }) })).result.script;
      await h.internal("scripts.delete", { uuid: s.uuid });
      const asked = pp.evaluate((msg) => chrome.runtime.sendMessage(msg).catch(() => null), { channel: "lumo:internal", op: "trash.purge", uuids: [s.uuid] }).catch(() => null);
      await sleep(i * 3);
      await h.stopProviderWorker();
      await asked;
      await h.internal("state.get"); // the next worker settles what the stop left
      await until(() => pp.evaluate(() => chrome.storage.local.get("audit/pending")), (x) => JSON.stringify(x["audit/pending"] ?? {}) === "{}", 3000);
      const inTrash = (await h.internal("trash.list")).scripts.some((t) => t.uuid === s.uuid);
      const entries = (await h.internal("audit.list")).entries.filter((e) => e.tool === "purge_trash" && e.target === s.uuid);
      const results = entries.map((e) => e.result);
      outcomes.push(inTrash ? "kept" : results.join());
      if (!inTrash && (entries.length !== 1 || !["ok", "INTERRUPTED"].includes(results[0]) || entries[0].caller !== "user")) {
        problems.push(`round ${i}: gone for good with the entries ${show(entries)}`);
      }
      if (inTrash && results.includes("ok")) problems.push(`round ${i}: still in the trash, recorded as purged`);
    }
    assert.deepEqual(problems, [], show(outcomes));
  });

  test("import is all or nothing: one bad file among three stores none; 45 files over the storage quota are refused before writing", T, async () => {
    await options.reload();
    const before = (await scripts()).map((s) => s.uuid).sort();
    await options.locator("#import-files").setInputFiles([
      { name: "g1.user.js", mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: "g1", version: "v1", name: "Good 1" })) },
      { name: "bad.user.js", mimeType: "text/javascript", buffer: Buffer.from("// ==UserScript==\n// @match not a pattern\n// ==/UserScript==\n") },
      { name: "g2.user.js", mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: "g2", version: "v1", name: "Good 2" })) },
    ]);
    await options.getByText(/Nothing imported: bad\.user\.js/).waitFor({ timeout: 5000 });
    assert.deepEqual((await scripts()).map((s) => s.uuid).sort(), before);
    const pad = `// ${"x".repeat(250 * 1024)}\n`;
    const big = Array.from({ length: 45 }, (_, i) => ({ name: `big${i}.user.js`, mimeType: "text/javascript", buffer: Buffer.from(userscript({ tag: `b${i}`, version: "v1", name: `Big ${i}` }) + pad) }));
    await options.locator("#import-files").setInputFiles(big);
    await options.locator("#import-review-ok").click();
    await options.getByText(/Nothing imported: not enough storage/).waitFor({ timeout: 20_000 });
    assert.deepEqual((await scripts()).map((s) => s.uuid).sort(), before, "not one of the 45 stored");
    const usage = await options.evaluate(() => chrome.storage.local.getBytesInUse(null));
    assert.ok(usage < 4 * 1024 * 1024, `storage holds ${usage} bytes`);
    const refused = (await h.internal("audit.list")).entries.find((e) => e.tool === "import_scripts");
    assert.equal(refused?.result, "STORAGE_ERROR");
    assert.equal(refused?.caller, "user");
  });

  test("the worker stopped mid-import, 20 times: each import is stored whole or not at all, and no script is lost", T, async () => {
    const names = async () => new Set((await scripts()).map((s) => s.name));
    const kept = await names();
    const outcomes = { whole: 0, none: 0 };
    for (let i = 0; i < 20; i++) {
      const files = Array.from({ length: 8 }, (_, j) => ({ name: `r${i}-${j}.user.js`, source: userscript({ tag: `r${i}-${j}`, version: "v1", name: `Round ${i} ${j}` }) + `// ${"y".repeat(8 * 1024)}\n` }));
      await options.evaluate((files) => {
        window.__import = chrome.runtime.sendMessage({ channel: "lumo:internal", op: "scripts.import", files, confirmed: true }).catch((e) => ({ lost: String(e) }));
      }, files);
      await sleep((i * 3) % 25);
      await h.stopProviderWorker();
      await options.evaluate(() => window.__import);
      const now = await names(); // restarts the worker
      for (const n of kept) assert.ok(now.has(n), `round ${i}: ${n} lost`);
      const came = files.filter((_, j) => now.has(`Round ${i} ${j}`)).length;
      assert.ok(came === 0 || came === files.length, `round ${i}: ${came} of ${files.length} stored`);
      if (came) { outcomes.whole++; for (let j = 0; j < files.length; j++) kept.add(`Round ${i} ${j}`); } else outcomes.none++;
    }
    console.log(`mid-import stops: ${outcomes.whole} stored whole, ${outcomes.none} not stored`);
    // The running worker settles an interrupted entry at start.
    let pending;
    for (const deadline = Date.now() + 3000; ;) {
      ({ "audit/pending": pending } = await options.evaluate(() => chrome.storage.local.get("audit/pending")));
      if (pending?.tool === undefined || Date.now() > deadline) break;
      await sleep(100);
    }
    assert.equal(pending?.tool, undefined, "no import is left pending in the journal");
    const log = (await h.internal("audit.list")).entries.filter((e) => e.tool === "import_scripts" && e.result !== "STORAGE_ERROR");
    assert.ok(log.length >= outcomes.whole, `every stored import is in the audit (${log.length} entries, ${outcomes.whole} stored)`);
    // A round stored while the worker was being stopped runs on the page.
    const some = [...kept].find((n) => n.startsWith("Round "));
    if (some) {
      const tag = some.replace(/^Round (\d+) (\d+)$/, "r$1-$2");
      const marks = await seen(tab, url, []);
      assert.ok(marks.includes(`${tag}:v1`), `${tag} runs: ${marks}`);
    }
  });
  test("popup Undo of the user's own Delete of a script the agent wrote brings it back, running", T, async () => {
    const w = await call("write_script", { source: userscript({ tag: "th", version: "v1", name: "Theirs" }) });
    const uuid = w.script.uuid;
    await options.reload();
    await options.getByRole("button", { name: "Delete Theirs" }).click();
    await options.getByRole("button", { name: "Confirm delete of Theirs" }).click();
    await options.getByText("Deleted Theirs.").waitFor({ timeout: 3000 });
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    const idx = (await h.internal("audit.list")).entries.findIndex((e) => e.tool === "delete_script" && e.target === uuid && e.caller === "user");
    assert.ok(idx >= 0);
    await popup.locator("#audit > li").nth(idx).getByRole("button", { name: /^Undo/ }).click();
    await popup.getByText(/^Undone/).waitFor({ timeout: 3000 });
    await popup.close();
    const marks = await seen(tab, url, []);
    assert.ok(marks.includes("th:v1"), `Theirs runs again: ${marks}`);
    assert.equal((await scripts()).find((s) => s.uuid === uuid)?.name, "Theirs");

    // That Undo was a restore from the trash; its own Undo sends the script back there.
    const again = await h.context.newPage();
    await again.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    const entries = (await h.internal("audit.list")).entries;
    const back = entries.findIndex((e) => e.tool === "restore_script" && e.target === uuid && e.caller === "user");
    assert.ok(back >= 0 && entries[back].fromTrash, JSON.stringify(entries[back]));
    // The delete is undone already (the script is out of the trash): its row has no Undo, which
    // would otherwise revert the version before the deleted one (R9).
    await again.locator("#audit > li").nth(back).getByRole("button", { name: /^Undo/ }).waitFor({ timeout: 3000 });
    const del = entries.findIndex((e) => e.tool === "delete_script" && e.target === uuid && e.caller === "user");
    assert.ok(del > back, JSON.stringify(entries.slice(0, 4)));
    assert.equal(await again.locator("#audit > li").nth(del).getByRole("button", { name: /^Undo/ }).count(), 0);
    await again.locator("#audit > li").nth(back).getByRole("button", { name: /^Undo/ }).click();
    await again.getByText(/^Undone/).waitFor({ timeout: 3000 });
    await again.close();
    assert.equal((await h.internal("scripts.revisions", { uuid })).deleted, true, "back in the trash");
    const after = await seen(tab, url, []);
    assert.ok(!after.includes("th:v1"), `Theirs no longer runs: ${after}`);
  });
  test("GM values: set by a script in a page, kept out of a plain export, exported when asked, and back after delete forever + restore", T, async () => {
    const { readFileSync } = await import("node:fs");
    const vurl = `http://values.test:${new URL(server.url).port}${PAGE}`;
    const source = [
      "// ==UserScript==", "// @name         Hands values", "// @namespace    lumo-e2e-hands",
      "// @match        http://values.test/*", "// @grant        GM_getValue", "// @grant        GM_setValue",
      "// ==/UserScript==",
      "(() => {",
      '  const v = GM_getValue("seen", "none");',
      '  const mark = document.createElement("lumo-mark");',
      '  mark.dataset.tag = "val";',
      "  mark.dataset.v = v;",
      "  document.documentElement.append(mark);",
      '  if (v === "none") GM_setValue("seen", "kept-42");',
      "})();", "",
    ].join("\n");
    const { uuid } = (await h.internal("scripts.save", { source })).result.script;
    const vtab = await h.context.newPage();
    assert.deepEqual(await seen(vtab, vurl, ["val:none"]), ["val:none"], "no value yet");
    assert.deepEqual(await seen(vtab, vurl, ["val:kept-42"], 5000), ["val:kept-42"], "the page's GM_setValue was kept");

    await options.reload();
    const exported = async () => {
      const [download] = await Promise.all([options.waitForEvent("download"), options.locator("#export-all").click()]);
      const path = await download.path();
      return { path, backup: JSON.parse(readFileSync(path)) };
    };
    assert.equal(await options.locator("#export-values").isChecked(), false, "values are off by default");
    const plain = await exported();
    assert.equal(plain.backup.version, 1);
    assert.ok(plain.backup.scripts.every((s) => !("values" in s)), "a plain export holds no values");
    await options.locator("#export-values").check();
    const full = await exported();
    assert.equal(full.backup.version, 2);
    assert.deepEqual(full.backup.scripts.find((s) => s.name === "Hands values").values, { seen: '"kept-42"' });

    await h.internal("scripts.delete", { uuid });
    await h.internal("trash.purge", { uuids: [uuid] });
    assert.deepEqual(await seen(vtab, vurl, []), [], "deleted forever: it runs no more");
    const left = await options.evaluate((u) => chrome.storage.local.get(`values/${u}`), uuid);
    assert.deepEqual(left, {}, "and its values are gone");

    await options.locator("#restore-file").setInputFiles(full.path);
    await options.locator("#import-review-ok").click();
    await options.getByText(/^Restored \d+ script\(s\) from the backup, with \d+ value\(s\)/).waitFor({ timeout: 10_000 });
    assert.deepEqual(await seen(vtab, vurl, ["val:kept-42"]), ["val:kept-42"], "the restored script starts with its restored value");
    // The same backup again, over the script it restored: its values are replaced whole and
    // kept in no history, so the confirmation says how many it would drop.
    await options.locator("#restore-file").setInputFiles(full.path);
    const line = options.locator("#import-review-list div", { hasText: "Restores 1 GM value(s)" });
    await line.waitFor({ timeout: 10_000 });
    assert.match(await line.textContent(), /in place of your script's 1 current GM value\(s\), which are not kept/);
    const item = options.locator("#import-review-list > li", { hasText: "Hands values" });
    assert.ok(!(await item.textContent()).includes("Switches your script"), "on in the file and on now: nothing to say");
    await options.locator("#import-review-cancel").click();
    // Turned off by the user's own switch: a backup that holds it on switches it back on, and
    // the confirmation says so (a tester saw it turned on silently).
    const restored = (await scripts()).find((s) => s.name === "Hands values");
    await options.locator(`.script-row[data-uuid="${restored.uuid}"] input[role=switch]`).uncheck();
    await options.getByText("Disabled Hands values.").waitFor({ timeout: 5000 });
    await options.locator("#restore-file").setInputFiles(full.path);
    await item.waitFor({ timeout: 10_000 });
    assert.match(await item.textContent(), /Switches your script on: it is off now, and runs again once replaced\./);
    await options.locator("#import-review-cancel").click();
    assert.equal((await scripts()).find((s) => s.name === "Hands values").enabled, false, "cancelled: still off");
    await vtab.close();
  });

  test("a restore shows what it would store before anything is fetched: the file's own text marked, where each script runs and what it reaches; Cancel stores nothing", T, async () => {
    const { createServer } = await import("node:http");
    let hits = 0;
    const lib = createServer((req, res) => { hits++; res.writeHead(200, { "content-type": "text/javascript" }).end("window.__reachLib = 1;"); });
    await new Promise((r) => lib.listen(0, "127.0.0.1", r));
    const libUrl = `http://127.0.0.1:${lib.address().port}/lib.js`;
    try {
      const source = [
        "// ==UserScript==", "// @name         Hands reach", "// @namespace    lumo-e2e-hands",
        "// @match        http://reach.test/*", "// @grant        GM_xmlhttpRequest", "// @connect      2130706433",
        `// @require      ${libUrl}`, "// ==/UserScript==", "1;", "",
      ].join("\n");
      const file = [{ name: "hostile.json", mimeType: "application/json",
        buffer: Buffer.from(JSON.stringify({ format: "lumo-userscripts-backup", version: 1, scripts: [{ name: `\u202Eevil\u200B${"x".repeat(5000)}`, source }] })) }];
      const before = (await scripts()).map((s) => s.uuid).sort();
      await options.reload();
      await options.locator("#restore-file").setInputFiles(file);
      const review = options.locator("#import-review");
      await review.waitFor({ state: "visible", timeout: 5000 });
      const text = await review.textContent();
      assert.equal(hits, 0, "nothing is fetched before the user confirms");
      assert.ok(text.includes("from \u27e8U+202E\u27e9evil\u27e8U+200B\u27e9xxx"), text);
      assert.ok(!text.includes("\u202E") && !text.includes("\u200B"), "no raw direction or invisible character");
      assert.ok(text.length < 3000, `the backup's 5,000-character name is bounded: ${text.length}`);
      for (const want of ["@match http://reach.test/*", "@grant GM_xmlhttpRequest", "@connect 2130706433 (this computer: 127.0.0.1)", `@require ${libUrl}`, "127.0.0.1 (this computer)"]) {
        assert.ok(text.includes(want), `${want} in: ${text}`);
      }
      await options.locator("#import-review-cancel").click();
      await options.getByText(/^Restore cancelled: nothing was restored/).waitFor({ timeout: 3000 });
      assert.equal(hits, 0);
      // Twenty one-site rules first cannot push what widens the script most out of a list
      // shown twenty lines at a time (a tester's helper for 20 shops that ran everywhere).
      const wide = [
        "// ==UserScript==", "// @name         Hands twenty shops", "// @namespace    lumo-e2e-hands",
        ...Array.from({ length: 20 }, (_, i) => `// @match        https://shop${i}.example/*`), "// @match        *://*/*",
        ...Array.from({ length: 20 }, (_, i) => `// @connect      api${i}.example`), "// @connect      *",
        "// @grant        GM_xmlhttpRequest", "// ==/UserScript==", "1;", "",
      ].join("\n");
      await options.locator("#import-files").setInputFiles([{ name: "shops.user.js", mimeType: "text/javascript", buffer: Buffer.from(wide) }]);
      await review.waitFor({ state: "visible", timeout: 5000 });
      const shops = await review.textContent();
      for (const want of ["@match *://*/*", "@connect *", "@match https://shop0.example/*", "… and 2 more line(s)"]) {
        assert.ok(shops.includes(want), `${want} in: ${shops}`);
      }
      assert.ok(!shops.includes("shop19.example"), "a one-site rule is what is counted instead");
      await options.locator("#import-review-cancel").click();
      await options.getByText(/^Import cancelled: nothing was imported/).waitFor({ timeout: 3000 });
      assert.deepEqual((await scripts()).map((s) => s.uuid).sort(), before);
      // Confirmed: the file is fetched, once, and the script stored.
      await options.locator("#restore-file").setInputFiles(file);
      await options.locator("#import-review-ok").click();
      await options.getByText(/^Restored 1 script\(s\) from the backup/).waitFor({ timeout: 10_000 });
      assert.equal(hits, 1);
      const reach = (await scripts()).find((s) => s.name === "Hands reach");
      await h.internal("scripts.delete", { uuid: reach.uuid });
      await h.internal("trash.purge", { uuids: [reach.uuid] });
    } finally {
      lib.close();
      lib.closeAllConnections();
    }
  });
  test("popup: new audit entries wait while the pointer is in the list, and when the list moves no Undo takes a click for a moment", T, async () => {
    const w = await call("write_script", { source: userscript({ tag: "pm", version: "v1" }) });
    const uuid = w.script.uuid;
    await call("write_script", { uuid, revision: 1, source: userscript({ tag: "pm", version: "v2" }) });
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    const rows = popup.locator("#audit > li");
    const top = rows.nth(0).getByRole("button", { name: /^Undo/ });
    await top.hover(); // waits until it is enabled and still
    const before = { count: await rows.count(), first: await rows.nth(0).textContent() };

    // A write lands while the pointer rests on the top row's Undo: nothing moves under it.
    await call("write_script", { uuid, revision: 2, source: userscript({ tag: "pm", version: "v3" }) });
    await popup.locator("#audit-new").getByText("+1 new").waitFor({ timeout: 3000 });
    assert.equal(await rows.count(), before.count, "no row was added under the pointer");
    assert.equal(await rows.nth(0).textContent(), before.first, "the row under the pointer is the same write");

    // The pointer leaves: the list catches up.
    await popup.locator("header h1").hover();
    await popup.waitForFunction((n) => document.querySelectorAll("#audit > li").length === n + 1, before.count, { timeout: 3000 });
    assert.equal(await popup.locator("#audit-new").textContent(), "");

    // An Undo's status line appears above the list and moves it: every other Undo waits a moment.
    const v3 = rows.nth(0);
    assert.match(await v3.textContent(), /write_script/);
    await v3.getByRole("button", { name: /^Undo/ }).click();
    await popup.getByText(/^Undone/).waitFor({ timeout: 3000 });
    await popup.waitForFunction(() => [...document.querySelectorAll("#audit button.undo")].slice(1).every((b) => b.disabled), null, { timeout: 2000, polling: "raf" });
    await popup.waitForFunction(() => [...document.querySelectorAll("#audit button.undo")].slice(1).some((b) => !b.disabled), null, { timeout: 3000 });
    assert.equal((await call("get_script", { uuid })).script.revision, 4, "one Undo, one new revision");
    await popup.close();
    await h.internal("scripts.delete", { uuid });
  });

  test("the editor: a save after the script's own switch was flipped is stored; a double click on Save saves once and says so", T, async () => {
    await options.reload();
    const { uuid } = (await h.internal("scripts.save", { source: userscript({ tag: "ed", version: "v1", name: "Edited" }) })).result.script;
    await options.reload();
    const toEnd = async () => {
      await options.locator("#editor-text .cm-content").click();
      await options.keyboard.press("Control+End");
    };
    await options.getByRole("button", { name: "Edit Edited" }).click();
    await toEnd();
    await options.keyboard.type("// my edit\n");
    // The user turns it off while the editor is open: only the switch changed, not the text.
    await options.getByRole("switch", { name: "Enabled: Edited" }).click();
    await until(async () => (await scripts()).find((s) => s.uuid === uuid).enabled, (v) => v === false, 3000);
    await options.locator("#editor-save").click();
    await until(status, (t) => /^(Saved|Not saved)/.test(t), 5000);
    assert.match(await status(), /^Saved Edited \(revision 3\)/);
    let got = (await h.internal("scripts.get", { uuid })).script;
    assert.ok(got.source.endsWith("// my edit\n"), got.source);
    assert.equal(got.enabled, false, "the switch stays as the user left it");
    // A double click: one save, told as saved.
    await toEnd();
    await options.keyboard.type("2;\n");
    await options.locator("#editor-save").dblclick();
    await sleep(1500);
    assert.equal((await h.internal("scripts.get", { uuid })).script.revision, 4);
    assert.match(await status(), /^Saved Edited \(revision 4\)/);
    // Changed by an agent meanwhile: the user's save is refused, not stored over it.
    await call("write_script", { uuid, revision: 4, source: userscript({ tag: "ed", version: "v9", name: "Edited" }) });
    await toEnd();
    await options.keyboard.type("3;\n");
    await options.locator("#editor-save").click();
    await until(status, (t) => /^Not saved/.test(t), 5000);
    assert.match(await status(), /copy your text/);
    got = (await h.internal("scripts.get", { uuid })).script;
    assert.equal(got.revision, 5);
    assert.match(got.source, /v9/);
    await options.locator("#editor-close").click();
    await h.internal("scripts.delete", { uuid });
  });

  test("popup: a refused Undo says why and nothing more", T, async () => {
    const w = await call("write_script", { source: userscript({ tag: "ud", version: "v1", name: "Undone" }) });
    const uuid = w.script.uuid;
    await call("write_script", { uuid, revision: 1, source: userscript({ tag: "ud", version: "v2", name: "Undone" }) });
    await call("delete_script", { uuid });
    const popup = await h.context.newPage();
    try {
      await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
      const i = (await h.internal("audit.list")).entries.findIndex((e) => e.tool === "write_script" && e.target === uuid && e.result === "ok");
      const row = popup.locator("#audit > li").nth(i);
      await row.getByRole("button", { name: /^Undo/ }).click();
      await popup.getByText(/^Not undone/).waitFor({ timeout: 3000 });
      const text = await row.locator(".undo-result").textContent();
      assert.match(text, /trash/);
      assert.doesNotMatch(text, /null/);
    } finally {
      await popup.close();
    }
  });
  // R9: with the trash full, the user's Delete pushes its oldest script out for good; the
  // confirmation said nothing of it, and a script the user had trashed first was gone.
  test("with the trash full, Confirm delete says which script the delete removes from the trash for good", T, async () => {
    const filler = [];
    const inTrash = async () => (await h.internal("trash.list")).scripts;
    const first = await h.internal("scripts.save", { source: userscript({ tag: "precious", version: "v1", name: "Precious" }) });
    assert.equal((await h.internal("scripts.delete", { uuid: first.result.script.uuid })).ok, true);
    filler.push(first.result.script.uuid);
    for (let n = (await inTrash()).length; n < 100; n++) {
      const r = await h.internal("scripts.save", { source: userscript({ tag: `fill${n}`, version: "v1" }) });
      assert.equal((await h.internal("scripts.delete", { uuid: r.result.script.uuid })).ok, true);
      filler.push(r.result.script.uuid);
    }
    const oldest = (await inTrash()).at(-1);
    const live = await h.internal("scripts.save", { source: userscript({ tag: "tobedeleted", version: "v1", name: "To be deleted" }) });
    try {
      await options.reload();
      await options.getByRole("button", { name: "Delete To be deleted", exact: true }).click();
      await options.getByRole("button", { name: "Confirm delete of To be deleted" }).waitFor({ timeout: 3000 });
      const notice = options.locator(`[data-uuid="${live.result.script.uuid}"] .notice`);
      assert.equal(await notice.textContent(), `The trash is full (100 scripts): this delete removes its oldest, “${oldest.name}”, for good.`);
      await options.getByRole("button", { name: "Cancel", exact: true }).click();
      // Below the bound, nothing is said.
      await h.internal("trash.purge", { uuids: [filler.pop()] });
      await options.getByRole("button", { name: "Delete To be deleted", exact: true }).click();
      await options.getByRole("button", { name: "Confirm delete of To be deleted" }).waitFor({ timeout: 3000 });
      assert.equal(await notice.count(), 0);
      await options.getByRole("button", { name: "Cancel", exact: true }).click();
    } finally {
      await h.internal("scripts.delete", { uuid: live.result.script.uuid });
      await h.internal("trash.purge", { uuids: [...filler, live.result.script.uuid] });
    }
  });

  test("popup: past the 200 newest audit rows it says how many are not shown, and an older write that can still be undone stays in reach", T, async () => {
    const w = await call("write_script", { source: userscript({ tag: "deep", version: "v1" }) });
    const uuid = w.script.uuid;
    await call("write_script", { uuid, revision: 1, source: userscript({ tag: "deep", version: "v2" }) });
    // 200 of the user's own saves of another script bury the agent's write past row 200.
    const mine = await h.internal("scripts.save", { source: userscript({ tag: "busy", version: "0", name: "Busy" }) });
    const busy = mine.result.script.uuid;
    for (let rev = 1; rev <= 200; rev++) {
      const r = await h.internal("scripts.save", { uuid: busy, revision: rev, source: userscript({ tag: "busy", version: String(rev), name: "Busy" }) });
      assert.equal(r.ok, true, JSON.stringify(r));
    }
    const { entries, undoable } = await h.internal("audit.list");
    const at = entries.findIndex((e) => e.tool === "write_script" && e.target === uuid && e.result === "ok");
    assert.ok(at >= 200, `the agent's write is past row 200: ${at}`);
    assert.ok(undoable.includes(at), "and can still be undone");
    const reachable = undoable.filter((i) => i >= 200);
    const popup = await h.context.newPage();
    try {
      await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
      const note = popup.locator("#audit > li.empty", { hasText: "older entr" });
      await note.waitFor({ timeout: 5000 });
      const hidden = entries.length - 200 - reachable.length;
      assert.equal(await note.textContent(), `${hidden} older entr${hidden === 1 ? "y is" : "ies are"} not shown (Export has every one; the filters narrow the list). Below: the older ones you can still undo.`);
      const rows = popup.locator("#audit > li");
      assert.equal(await rows.count(), 200 + 1 + reachable.length, "200 rows, the note, and the older writes with Undo");
      const row = rows.nth(201 + reachable.indexOf(at));
      assert.match(await row.textContent(), /write_script/);
      await row.getByRole("button", { name: /^Undo/ }).click();
      await popup.getByText(/^Undone/).waitFor({ timeout: 5000 });
      const back = await call("get_script", { uuid });
      assert.equal(back.script.source, userscript({ tag: "deep", version: "v1" }), "the version before the undone write is back");
    } finally {
      await popup.close();
      await h.internal("scripts.delete", { uuid });
      await h.internal("scripts.delete", { uuid: busy });
      await h.internal("trash.purge", { uuids: [uuid, busy] });
    }
  });
});
