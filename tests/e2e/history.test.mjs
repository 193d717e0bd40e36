// Revision history, restore and trash through the MCP tools (official SDK client in the test
// host), checked where it counts: the page runs the version the tools say is current.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HOST_ID } from "./lib/harness.mjs";
import { markScript, marksOf, seen, setUp } from "./lib/agent.mjs";
import { sleep } from "./lib/util.mjs";

const T = { timeout: 90_000 };

const userscript = ({ tag, version, name = `History ${tag}` }) => markScript({ tag, version, name, namespace: "lumo-e2e-history" });

describe("history: revisions, restore and trash, seen on a real page", () => {
  let env, t, uuid;
  before(async () => {
    env = await setUp();
    t = env.tools;
  });
  after(async () => { await env?.close(); });
  const onPage = (expected) => seen(env.tab, env.url(), expected);

  test("v1, v2, v3 by the agent -> list_revisions names them and their author -> restore v1 -> the page runs v1", T, async () => {
    const w = await t.ok("write_script", { source: userscript({ tag: "h", version: "v1" }) });
    uuid = w.script.uuid;
    await t.ok("write_script", { uuid, revision: 1, source: userscript({ tag: "h", version: "v2" }) });
    await t.ok("patch_script", { uuid, revision: 2, edits: [{ search: '"v2"', replace: '"v3"' }] });
    assert.deepEqual(await onPage(["h:v3"]), ["h:v3"]);

    const l = await t.ok("list_revisions", { uuid });
    assert.deepEqual(l.revisions.map((r) => [r.revision, r.by, r.via, r.current]), [
      [3, HOST_ID, "patch_script", true],
      [2, HOST_ID, "write_script", false],
      [1, HOST_ID, "write_script", false],
    ]);
    const v1 = await t.ok("get_script", { uuid, revision: 1 });
    assert.equal(v1.script.source, userscript({ tag: "h", version: "v1" }));

    await t.fails("restore_script", { uuid, revision: 1, current_revision: 2 }, "CONFLICT");
    await t.fails("restore_script", { uuid, revision: 99, current_revision: 3 }, "NOT_FOUND");
    const r = await t.ok("restore_script", { uuid, revision: 1, current_revision: 3 });
    assert.equal(r.script.revision, 4);
    assert.equal(r.registered, true);
    assert.deepEqual(await onPage(["h:v1"]), ["h:v1"], "the restored v1 runs, once");
    const after = await t.ok("list_revisions", { uuid });
    assert.deepEqual(after.revisions.map((x) => [x.revision, x.via]), [[4, "restore_script"], [3, "patch_script"], [2, "write_script"], [1, "write_script"]]);
  });

  test("delete -> trash (listed, not running) -> restore_script -> runs again", T, async () => {
    await t.ok("delete_script", { uuid, revision: 4 });
    assert.deepEqual(await onPage([]), [], "a deleted script does not run");
    assert.equal((await t.ok("list_scripts", {})).total, 0);
    const trash = await t.ok("list_scripts", { deleted: true });
    assert.deepEqual(trash.scripts.map((s) => [s.uuid, s.deleted, s.deletedBy]), [[uuid, true, HOST_ID]]);
    const got = await t.ok("get_script", { uuid });
    assert.equal(got.script.deleted, true);
    const r = await t.ok("restore_script", { uuid, revision: 4, current_revision: 4 });
    assert.equal(r.created, false, "the same script back, not a new one");
    assert.equal(r.registered, true);
    assert.deepEqual(await onPage(["h:v1"]), ["h:v1"], "back from the trash, it runs");
    assert.equal((await t.ok("list_scripts", { deleted: true })).total, 0);
  });

  test("read-only mode refuses restore_script (WRITE_DISABLED) and hides it; list_revisions still answers", T, async () => {
    await env.h.internal("policy.setSwitch", { name: "writes", value: false });
    try {
      await t.fails("restore_script", { uuid, revision: 2, current_revision: 5 }, "WRITE_DISABLED");
      await t.ok("list_revisions", { uuid });
      assert.deepEqual(await onPage(["h:v1"]), ["h:v1"], "nothing changed");
    } finally {
      await env.h.internal("policy.setSwitch", { name: "writes", value: true });
    }
  });

  test("a history stored in the old layout (every revision in one key) is read, then split into a key per revision at the next write", T, async () => {
    const w = await t.ok("write_script", { source: userscript({ tag: "old", version: "v1" }) });
    const u = w.script.uuid;
    await t.ok("write_script", { uuid: u, revision: 1, source: userscript({ tag: "old", version: "v2" }) });
    const page = await env.h.providerPage();
    const storage = (keys) => page.evaluate((keys) => chrome.storage.local.get(keys), keys);
    const prefix = `history/${u}`;
    const keysOf = async () => Object.keys(await storage(null)).filter((k) => k.startsWith(prefix)).sort();
    assert.deepEqual(await keysOf(), [prefix, `${prefix}/1`], "the new layout: an index and revision 1 under its own key");
    // What an earlier version of the extension stored: revision 1 inline in the index.
    const one = (await storage(`${prefix}/1`))[`${prefix}/1`];
    await page.evaluate(async ([prefix, one]) => {
      await chrome.storage.local.set({ [prefix]: { v: 1, revisions: [one] } });
      await chrome.storage.local.remove(`${prefix}/1`);
    }, [prefix, one]);
    assert.deepEqual((await t.ok("list_revisions", { uuid: u })).revisions.map((r) => r.revision), [2, 1]);
    assert.equal((await t.ok("get_script", { uuid: u, revision: 1 })).script.source, userscript({ tag: "old", version: "v1" }));
    await t.ok("write_script", { uuid: u, revision: 2, source: userscript({ tag: "old", version: "v3" }) });
    assert.deepEqual(await keysOf(), [prefix, `${prefix}/1`, `${prefix}/2`], "split at the write");
    assert.equal((await storage(prefix))[prefix].v, 2);
    const r = await t.ok("restore_script", { uuid: u, revision: 1, current_revision: 3 });
    assert.equal(r.registered, true);
    assert.deepEqual(await seen(env.tab, env.url(), ["old:v1", "h:v1"]), ["h:v1", "old:v1"], "the restored v1 runs");
    await t.ok("delete_script", { uuid: u, revision: 4 });
    await env.h.internal("trash.purge", { uuids: [u] });
    assert.deepEqual(await keysOf(), [], "purged: no key of its history is left");
  });

  test("the user turned a script off: the agent's restore_script brings back the code and leaves it off", T, async () => {
    const w = await t.ok("write_script", { source: userscript({ tag: "off", version: "v1" }) });
    const u = w.script.uuid;
    await t.ok("write_script", { uuid: u, revision: 1, source: userscript({ tag: "off", version: "v2" }) });
    const off = await env.h.internal("scripts.setEnabled", { uuid: u, enabled: false });
    assert.equal(off.ok, true, JSON.stringify(off));
    const r = await t.ok("restore_script", { uuid: u, revision: 1, current_revision: 3 });
    assert.equal(r.script.enabled, false, "R17: the restore turned it back on");
    assert.equal(r.registered, false);
    assert.deepEqual(await seen(env.tab, env.url(), ["h:v1"]), ["h:v1"], "the script the user turned off does not run");
    // The agent's switch is set_script_enabled: then the restored code runs.
    await t.ok("set_script_enabled", { uuid: u, enabled: true });
    assert.deepEqual(await seen(env.tab, env.url(), ["h:v1", "off:v1"]), ["h:v1", "off:v1"]);
    await t.ok("delete_script", { uuid: u });
  });

  test("the worker stopped mid-restore, 20 times: the script is whole and no version is lost", T, async () => {
    const sources = new Set();
    const stored = async () => (await t.ok("get_script", { uuid })).script;
    let s = await stored();
    const hist = async () => (await t.ok("list_revisions", { uuid })).revisions;
    for (const r of await hist()) sources.add((await t.ok("get_script", { uuid, revision: r.revision })).script.sha256);
    for (let i = 0; i < 20; i++) {
      const revs = await hist();
      const target = revs.find((r) => !r.current && r.sha256 !== s.sha256) ?? revs[revs.length - 1];
      await env.h.hostPage().then((p) => p.evaluate(([sess, args]) => {
        window.__inflight = [window.lumo.callTool(sess, "restore_script", args)];
      }, [env.session, { uuid, revision: target.revision, current_revision: s.revision }]));
      await sleep((i * 7) % 40);
      await env.h.stopProviderWorker();
      await env.h.hostPage().then((p) => p.evaluate(() => Promise.allSettled(window.__inflight)));
      const now = await stored(); // restarts the worker
      assert.ok(now.revision === s.revision || now.revision === s.revision + 1, `round ${i}: revision ${s.revision} -> ${now.revision}`);
      const kept = new Set([(await stored()).sha256]);
      for (const r of await hist()) kept.add(r.sha256);
      // Every version seen so far is still current or in the history (20 revisions fit).
      for (const sha of sources) assert.ok(kept.has(sha), `round ${i}: version ${sha} lost`);
      sources.add(now.sha256);
      s = now;
      if (i % 10 === 9) await sleep(1000);
    }
    const mark = [`h:${/dataset\.v = "(v\d)"/.exec(s.source)[1]}`];
    assert.deepEqual(await onPage(mark), mark, "the page runs the stored version");
  });

  test("a run of 22 agent writes right after the user's edit cannot push the user's version out of the history", { timeout: 240_000 }, async () => {
    const source = (v) => userscript({ tag: "run", version: v });
    const { uuid: u } = (await env.h.internal("scripts.save", { source: source("mine") })).result.script;
    // Within the agent's rate limit (30 a minute): a refused write waits for the window.
    for (let n = 1; n <= 22;) {
      const res = await t.call("write_script", { uuid: u, revision: n, source: source(`a${n}`) });
      if (res.structuredContent?.error_code === "RATE_LIMITED") { await sleep(2000); continue; }
      assert.equal(res.isError, false, JSON.stringify(res.structuredContent));
      n++;
    }
    const revs = (await t.ok("list_revisions", { uuid: u })).revisions;
    assert.equal(revs.length, 21, "the current version and 20 kept");
    const mine = revs.find((r) => r.by === "user");
    assert.ok(mine?.revision === 1, `the user's version is kept: ${JSON.stringify(revs.map((r) => [r.revision, r.by]))}`);
    // And it can be brought back: the page runs it (beside what the earlier tests left).
    await env.tab.goto(env.url(), { waitUntil: "load" });
    const others = (await marksOf(env.tab)).filter((m) => !m.startsWith("run:"));
    // The agent's 22 writes and the file's earlier ones may fill its window (30 a minute): a
    // call refused for it waits, as the loop above does.
    const agent = async (name, args) => {
      for (;;) {
        const res = await t.call(name, args);
        if (res.structuredContent?.error_code !== "RATE_LIMITED") return assert.equal(res.isError, false, JSON.stringify(res.structuredContent));
        await sleep(2000);
      }
    };
    await agent("restore_script", { uuid: u, revision: 1, current_revision: 23 });
    const want = [...others, "run:mine"].sort();
    assert.deepEqual(await onPage(want), want);
    await agent("delete_script", { uuid: u, revision: 24 });
  });
});
