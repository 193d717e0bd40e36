// L1: the MCP session over a `lumo:mcp` port, seen from the test host — through the official
// SDK client (window.lumo.connect/listTools/callTool/ping/info) and through raw ports for what
// the SDK would never send. Authorization, policy switches mid-session, worker recycling and
// the user's "disconnect" button.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { ABSENT_ID, HOST_ID, PROVIDER_ID, launch } from "./lib/harness.mjs";
import { MCP_PORT } from "./lib/contract.mjs";
import { until, sleep, show } from "./lib/util.mjs";

const T = { timeout: 60_000 };

const UNAUTHORIZED = -32001;
const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;
const INVALID_PARAMS = -32602;

const READ_TOOLS = ["get_script", "list_revisions", "list_scripts", "match_url", "script_runs", "status", "validate_script"];
const WRITE_TOOLS = ["delete_script", "patch_script", "restore_script", "set_script_enabled", "try_script", "write_script"];
const ALL_TOOLS = [...READ_TOOLS, ...WRITE_TOOLS].sort();
/** [readOnlyHint, destructiveHint, idempotentHint, openWorldHint] per tool (openWorldHint false where not given). */
const HINTS = {
  status: [true, false, true],
  list_scripts: [true, false, true],
  get_script: [true, false, true],
  validate_script: [true, false, true],
  match_url: [true, false, true],
  write_script: [false, true, false], // replaces a script's whole source
  patch_script: [false, true, false], // edits in place; a repeat applies the edits again
  set_script_enabled: [false, false, true], // reversible, same state when repeated
  delete_script: [false, true, true], // to the trash; deleting again changes nothing
  list_revisions: [true, false, true],
  script_runs: [true, false, true],
  // Replaces the live version (or brings a deleted script back to run), as write_script does;
  // the replaced version stays in the history for both. A repeat is a CONFLICT.
  restore_script: [false, true, false],
  // Runs any code in a page the user is logged in to (it may delete there) and changes nothing
  // stored; a repeat runs again.
  try_script: [false, true, false, true],
};

const userscript = (name) => [
  "// ==UserScript==",
  `// @name        ${name}`,
  "// @namespace   lumo-e2e",
  "// @match       https://example.com/*",
  "// ==/UserScript==",
  `console.log(${JSON.stringify(name)});`,
  "",
].join("\n");

const initialize = (id, protocolVersion = LATEST_PROTOCOL_VERSION) => ({
  jsonrpc: "2.0", id, method: "initialize",
  params: { protocolVersion, capabilities: {}, clientInfo: { name: "raw e2e", version: "0" } },
});
const initialized = { jsonrpc: "2.0", method: "notifications/initialized" };

const sorted = (a) => [...a].sort();

/** Session helpers bound to a harness. */
function mcp(h) {
  const m = {
    connect: async () => {
      const s = await h.lumo("connect", PROVIDER_ID);
      assert.equal(typeof s, "number", `connect failed: ${show(s)}`);
      return s;
    },
    info: (s) => h.lumo("info", s),
    list: async (s) => {
      const r = await h.lumo("listTools", s);
      assert.ok(!r.error, `listTools failed: ${show(r.error)}`);
      return r.tools;
    },
    /** The raw host answer: a CallToolResult, or {error} if the SDK threw. */
    call: (s, name, args = {}) => h.lumo("callTool", s, name, args),
    /** A call that must come back as a successful (isError: false) result. */
    ok: async (s, name, args = {}) => {
      const r = await m.call(s, name, args);
      assert.ok(!r.error, `${name}: the SDK call failed: ${show(r.error)}`);
      assert.equal(r.isError, false, `${name}: ${show(r)}`);
      assert.equal(typeof r.structuredContent, "object", `${name}: structuredContent: ${show(r)}`);
      return r;
    },
    close: (s) => h.lumo("close", s),
    hostSessions: async () => (await h.internal("state.get")).sessions.filter((x) => x.caller === HOST_ID),
    /** Waits until the host has no open port at the provider (left-overs from earlier tests close asynchronously). */
    noHostSessions: async () => {
      const left = await until(m.hostSessions, (l) => l.length === 0, 2000);
      assert.deepEqual(left, [], "no session of the host is open at the start");
    },
  };
  return m;
}

/** Raw-port helpers: send one message and wait for the reply carrying `id`. */
function raw(h) {
  const r = {
    open: async (name = MCP_PORT) => {
      const p = await h.lumo("rawOpen", PROVIDER_ID, name);
      assert.equal(typeof p, "number", `rawOpen failed: ${show(p)}`);
      return p;
    },
    send: async (p, msg) => {
      const res = await h.lumo("rawSend", p, msg);
      assert.deepEqual(res, { sent: true }, `rawSend ${show(msg)}`);
    },
    messages: (p) => h.lumo("rawMessages", p),
    info: (p) => h.lumo("rawInfo", p),
    close: (p) => h.lumo("rawClose", p),
    /** Sends `msg`, waits for the reply whose id is `id` (default msg.id); exactly one new message must arrive. */
    rpc: async (p, msg, id = msg.id) => {
      const before = (await r.messages(p)).length;
      await r.send(p, msg);
      const fresh = await until(async () => (await r.messages(p)).slice(before), (l) => l.some((m) => m.id === id), 3000);
      const reply = fresh.find((m) => m.id === id);
      assert.ok(reply, `no reply with id ${show(id)} to ${show(msg)}; got ${show(fresh)}`);
      assert.equal(fresh.length, 1, `exactly one message in answer to ${show(msg)}: ${show(fresh)}`);
      assert.equal(reply.jsonrpc, "2.0");
      return reply;
    },
  };
  return r;
}

function assertRpcError(reply, id, code, messageRe) {
  assert.ok(reply.error, `expected a JSON-RPC error, got ${show(reply)}`);
  assert.ok(!("result" in reply), `an error reply has no result: ${show(reply)}`);
  assert.strictEqual(reply.id, id, `id echoed: ${show(reply)}`);
  assert.equal(reply.error.code, code, `error code: ${show(reply)}`);
  assert.equal(typeof reply.error.message, "string");
  if (messageRe) assert.match(reply.error.message, messageRe);
}

/** A business failure: a successful MCP call with isError and a stable error_code. */
function assertToolError(r, code, messageRe) {
  assert.ok(!r.error, `expected an isError result, the SDK call failed instead: ${show(r.error)}`);
  assert.equal(r.isError, true, `isError: ${show(r)}`);
  assert.equal(r.structuredContent?.error_code, code, `error_code: ${show(r.structuredContent)}`);
  assert.equal(typeof r.structuredContent.message, "string");
  if (messageRe) assert.match(r.structuredContent.message, messageRe);
  assert.equal(r.content?.[0]?.type, "text");
  assert.ok(r.content[0].text.includes(code), `the text names ${code}: ${r.content[0].text}`);
}

// ------------------------------------------------------------------------------------------

describe("mcp: caller never approved (fresh profile)", () => {
  let h, m, rp;
  const panics = [];
  before(async () => { h = await launch(); m = mcp(h); rp = raw(h); h.watchPanics(panics); });
  after(async () => { await h?.close(); });

  test("2. unauthorized connect without probing: every buffered request gets -32001, port closed, no tool ran", T, async () => {
    const { policy } = await h.internal("state.get");
    assert.ok(!policy.allowlist.some((e) => e.id === HOST_ID), "host not approved");

    // Opened and sent in one turn of the host page, so all three messages are in flight before
    // the provider's authorization read can finish (one rawSend per evaluate would be too slow).
    const msgs = [
      initialize("init-1"),
      initialized,
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "write_script", arguments: { source: userscript("e2e unauthorized") } } },
    ];
    const page = await h.hostPage();
    const { p, sent } = await page.evaluate(([id, name, msgs]) => {
      const p = window.lumo.rawOpen(id, name);
      return { p, sent: msgs.map((msg) => window.lumo.rawSend(p, msg)) };
    }, [PROVIDER_ID, MCP_PORT, msgs]);
    assert.equal(typeof p, "number", `rawOpen failed: ${show(p)}`);
    assert.deepEqual(sent, [{ sent: true }, { sent: true }, { sent: true }]);
    const info = await until(() => rp.info(p), (i) => i.closed, 3000);
    assert.equal(info.closed, true, `the provider closed the port: ${show(info)}`);
    assert.equal(info.messages.length, 2, `one reply per request, none for the notification: ${show(info.messages)}`);
    const [a, b] = info.messages;
    assertRpcError(a, "init-1", UNAUTHORIZED, /allowlist/i);
    assertRpcError(b, 2, UNAUTHORIZED, /allowlist/i);
    assert.equal(a.error.message, b.error.message);

    assert.deepEqual(await m.hostSessions(), [], "no session left open");

    // Approve now and look: nothing was written.
    await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
    const s = await m.connect();
    try {
      const listed = await m.ok(s, "list_scripts");
      assert.equal(listed.structuredContent.total, 0, show(listed.structuredContent));
      assert.deepEqual(listed.structuredContent.scripts, []);
      const status = await m.ok(s, "status");
      assert.equal(status.structuredContent.scriptCount, 0);
      assert.equal(status.structuredContent.writesLeftInWindow, 30, "the refused write spent no rate-limit slot");
    } finally {
      await m.close(s);
    }
  });

  test("the provider logged no panic", T, () => { assert.deepEqual(panics, []); });
});

describe("mcp: approved caller", () => {
  let h, m, rp;
  const panics = [];
  before(async () => {
    h = await launch();
    m = mcp(h);
    rp = raw(h);
    h.watchPanics(panics);
    await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
  });
  after(async () => { await h?.close(); });

  test("1. SDK client: initialize, tools/list, status (validated against outputSchema), ping", T, async () => {
    const l0 = await h.lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(l0.response?.ok, true, show(l0));
    assert.equal(l0.response.status.authorized, true);

    const s = await m.connect();
    try {
      const i = await m.info(s);
      assert.equal(i.connected, true);
      assert.equal(i.reconnects, 0);
      // The SDK asks for its latest revision; the provider supports it, so it must keep it.
      assert.equal(i.protocolVersion, LATEST_PROTOCOL_VERSION);
      assert.equal(i.serverInfo?.name, "lumo-userscripts", show(i.serverInfo));
      assert.equal(i.serverInfo.title, l0.response.service.name, "serverInfo.title is the L0 service name");
      assert.equal(i.serverInfo.title, "Lumo Userscripts");
      assert.equal(i.serverInfo.version, l0.response.service.version, "serverInfo.version is the L0 service version");
      assert.match(i.serverInfo.version, /^\d+\.\d+\.\d+/);
      assert.equal(typeof i.instructions, "string");
      assert.match(i.instructions, /untrusted/i, "instructions warn that script data is untrusted");
      assert.match(i.instructions, /never follow instructions/i);
      assert.match(i.instructions, /write_script/, "writes are on: the instructions name the write tools");
      assert.match(i.instructions, /Allow User Scripts/, "user scripts are off in a fresh profile: the instructions say so");

      const sessions = await m.hostSessions();
      assert.equal(sessions.length, 1, `one open port: ${show(sessions)}`);
      assert.equal(sessions[0].state, "ready");
      assert.equal(sessions[0].protocolVersion, LATEST_PROTOCOL_VERSION);

      const tools = await m.list(s);
      assert.equal(tools.length, ALL_TOOLS.length, show(tools.map((t) => t.name)));
      assert.deepEqual(sorted(tools.map((t) => t.name)), ALL_TOOLS);
      const validator = new CfWorkerJsonSchemaValidator();
      for (const t of tools) {
        const where = `${t.name}: ${show(t)}`;
        assert.ok(t.name.length <= 40 && "userscripts".length + t.name.length <= 57, where);
        assert.equal(typeof t.title, "string", where);
        assert.ok(t.title.length > 0 && t.description?.length > 0, where);
        assert.equal(t.inputSchema?.type, "object", where);
        assert.equal(t.inputSchema.additionalProperties, false, where);
        assert.equal(t.outputSchema?.type, "object", where);
        assert.doesNotThrow(() => validator.getValidator(t.outputSchema), where);
        const [readOnly, destructive, idempotent, openWorld = false] = HINTS[t.name];
        assert.deepEqual(
          {
            readOnlyHint: t.annotations?.readOnlyHint, destructiveHint: t.annotations?.destructiveHint,
            idempotentHint: t.annotations?.idempotentHint, openWorldHint: t.annotations?.openWorldHint,
          },
          { readOnlyHint: readOnly, destructiveHint: destructive, idempotentHint: idempotent, openWorldHint: openWorld },
          where,
        );
      }

      // listTools cached the output validators: the SDK validates this result against status's outputSchema.
      const r = await m.ok(s, "status");
      const statusTool = tools.find((t) => t.name === "status");
      const v = validator.getValidator(statusTool.outputSchema)(r.structuredContent);
      assert.ok(v.valid, `structuredContent matches outputSchema: ${v.errorMessage}`);
      const { reason, ...rest } = r.structuredContent;
      assert.deepEqual(rest, {
        version: i.serverInfo.version, writesEnabled: true, reviewWrites: false, scriptsCanRun: false,
        scriptCount: 0, writesLeftInWindow: 30, rateLimit: { maxWrites: 30, windowSeconds: 60 }, registrationErrors: {},
      });
      assert.match(reason, /Allow User Scripts/);
      assert.equal(r.content?.[0]?.type, "text");

      assert.deepEqual(await h.lumo("ping", s), {});
      assert.equal((await m.info(s)).connected, true);
    } finally {
      await m.close(s);
    }
  });

  test("1b. business failures reach the SDK client as isError results (after listTools, as hosts do)", T, async () => {
    // The contract: "A business failure is returned as a successful MCP call with isError: true,
    // so the model can read the reason instead of losing the turn." A host lists tools first
    // (window.lumo.probe does), which makes the SDK client check every structuredContent against
    // the tool's outputSchema. Three paths, all checked before failing, so the report shows each.
    const problems = [];
    const check = (what, r, code) => {
      try { assertToolError(r, code); } catch (e) { problems.push(`${what}: ${e.message.split("\n")[0]}`); }
    };
    const s = await m.connect();
    try {
      await m.list(s);
      check("get_script on a missing uuid", await m.call(s, "get_script", { uuid: "00000000-0000-4000-8000-000000000000" }), "NOT_FOUND");

      // Writes turned off while the host still holds the tool list that has write_script.
      await h.internal("policy.setSwitch", { name: "writes", value: false });
      try {
        check("write_script in read-only mode", await m.call(s, "write_script", { source: userscript("e2e 1b") }), "WRITE_DISABLED");
      } finally {
        await h.internal("policy.setSwitch", { name: "writes", value: true });
      }

      await m.list(s);
      await h.internal("policy.setSwitch", { name: "endpoint", value: false });
      try {
        // Revocation closes the port at once; the SDK's reconnect for the next call is refused
        // with the reason.
        const i = await until(() => m.info(s), (x) => !x.connected, 2000);
        if (i.connected) problems.push("endpoint off: the port stayed open");
        const r = await m.call(s, "status");
        if (r.error?.code !== UNAUTHORIZED || !/turned off/i.test(r.error.message)) problems.push(`status with the endpoint off: ${show(r)}`);
      } finally {
        await h.internal("policy.setSwitch", { name: "endpoint", value: true });
      }
    } finally {
      await m.close(s);
    }
    assert.deepEqual(problems, []);
  });

  test("1c. list_scripts' query ignores case beyond ASCII, as the browser lowercases (toLowerCase)", T, async () => {
    // The worker lowercases non-ASCII text with V8's toLowerCase, not Rust's tables (the wasm's
    // size): a binding that lowercased nothing, or only ASCII, fails here.
    const s = await m.connect();
    try {
      const w = await m.ok(s, "write_script", { source: userscript("e2e École Straße ΣΑΣ") });
      const { uuid, revision } = w.structuredContent.script;
      try {
        const found = async (query) => (await m.ok(s, "list_scripts", { query })).structuredContent.scripts.map((x) => x.uuid);
        assert.deepEqual(await found("école"), [uuid], "the name's É → é");
        assert.deepEqual(await found("ÉCOLE"), [uuid], "the query's É → é too");
        assert.deepEqual(await found("e2e école straße"), [uuid], "the whole name, ASCII and not");
        assert.deepEqual(await found("σας"), [uuid], "ΣΑΣ → σας (a final sigma)");
        assert.deepEqual(await found("ΣΑΣ"), [uuid]);
        assert.deepEqual(await found("STRASSE"), [], "ß is not folded to ss: lowercase, not case folding");
      } finally {
        await m.ok(s, "delete_script", { uuid, revision });
      }
    } finally {
      await m.close(s);
    }
  });

  test("1d. a session opened without a probe first (a reconnect) is seen: the caller's Last seen is recorded", T, async () => {
    // Added afresh: never seen since.
    await h.internal("policy.remove", { id: HOST_ID });
    await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
    const seen = async () => (await h.internal("state.get")).policy.allowlist.find((e) => e.id === HOST_ID)?.lastSeen;
    assert.equal(await seen(), null, "seen before any session");
    const s = await m.connect();
    try {
      assert.equal((await m.info(s)).connected, true);
      assert.equal(typeof await until(seen, (t) => t !== null, 5000), "number", "the session's caller not recorded as seen");
    } finally {
      await m.close(s);
    }
  });

  test("8. raw JSON-RPC on an authorized port: ids, pre-initialize, notifications, errors, batches", T, async () => {
    const p = await rp.open();
    try {
      // Before initialize: requests other than ping are refused with a clear message.
      assertRpcError(await rp.rpc(p, { jsonrpc: "2.0", id: "pre-1", method: "tools/list" }), "pre-1", INVALID_REQUEST, /initialize/);
      assertRpcError(
        await rp.rpc(p, { jsonrpc: "2.0", id: 99, method: "tools/call", params: { name: "status", arguments: {} } }),
        99, INVALID_REQUEST, /initialize/,
      );
      const early = await rp.rpc(p, { jsonrpc: "2.0", id: 1, method: "ping" });
      assert.deepEqual(early, { jsonrpc: "2.0", id: 1, result: {} });

      // Initialize with an older supported revision: negotiated to exactly that one.
      const init = await rp.rpc(p, initialize("init", "2025-06-18"));
      assert.strictEqual(init.id, "init");
      assert.ok(!init.error, show(init));
      assert.equal(init.result.protocolVersion, "2025-06-18");
      assert.deepEqual(init.result.capabilities, { tools: { listChanged: true } });
      assert.equal(init.result.serverInfo.name, "lumo-userscripts");
      assert.equal(init.result.serverInfo.title, "Lumo Userscripts");
      assert.match(init.result.instructions, /untrusted/i);

      // Notifications get no reply (checked below by the total message count too).
      const beforeNotes = (await rp.messages(p)).length;
      await rp.send(p, initialized);
      await rp.send(p, { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 12345 } });
      await rp.send(p, { jsonrpc: "2.0", method: "no/such/notification" });
      // Responses are never answered either, whatever their id (an error response to a message
      // the client could not read has id null, or none).
      await rp.send(p, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
      await rp.send(p, { jsonrpc: "2.0", error: { code: -32600, message: "Invalid Request" } });
      const afterPing = await rp.rpc(p, { jsonrpc: "2.0", id: "after-notes", method: "ping" });
      assert.deepEqual(afterPing.result, {});
      await sleep(300);
      assert.equal((await rp.messages(p)).length, beforeNotes + 1, `only the ping was answered: ${show((await rp.messages(p)).slice(beforeNotes))}`);

      // Ids of either type are echoed exactly, type included.
      for (const id of ["str-id", "42", "", 42, 0, -7, 1.5, 9007199254740991]) {
        const r = await rp.rpc(p, { jsonrpc: "2.0", id, method: "ping" }, id);
        assert.strictEqual(r.id, id, `id ${show(id)} echoed as ${show(r.id)}`);
        assert.deepEqual(r.result, {});
      }
      const listed = await rp.rpc(p, { jsonrpc: "2.0", id: "list-7", method: "tools/list" });
      assert.strictEqual(listed.id, "list-7");
      assert.equal(listed.result.tools.length, ALL_TOOLS.length);
      // One page, no nextCursor: a cursor it never issued is invalid params.
      assert.equal(listed.result.nextCursor, undefined);
      assertRpcError(
        await rp.rpc(p, { jsonrpc: "2.0", id: "list-c", method: "tools/list", params: { cursor: "eyJwYWdlIjogMn0=" } }),
        "list-c", INVALID_PARAMS, /cursor/,
      );
      const called = await rp.rpc(p, { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "status", arguments: {} } });
      assert.strictEqual(called.id, 7);
      assert.equal(called.result.isError, false);

      // A second initialize on the same port is refused.
      assertRpcError(await rp.rpc(p, initialize("init-again")), "init-again", INVALID_REQUEST, /already initialized/);
      // Unknown method.
      assertRpcError(await rp.rpc(p, { jsonrpc: "2.0", id: "m", method: "no/such_method" }), "m", METHOD_NOT_FOUND, /no\/such_method/);
      // Unknown tool.
      assertRpcError(
        await rp.rpc(p, { jsonrpc: "2.0", id: "t", method: "tools/call", params: { name: "no_such_tool", arguments: {} } }),
        "t", INVALID_PARAMS, /no_such_tool/,
      );
      // Malformed params.
      assertRpcError(
        await rp.rpc(p, { jsonrpc: "2.0", id: "a", method: "tools/call", params: { name: "status", arguments: "x" } }),
        "a", INVALID_PARAMS, /arguments/,
      );
      assertRpcError(await rp.rpc(p, { jsonrpc: "2.0", id: "n", method: "tools/call", params: {} }), "n", INVALID_PARAMS, /name/);
      assertRpcError(await rp.rpc(p, { jsonrpc: "2.0", id: "arr", method: "tools/call", params: [1] }), "arr", INVALID_PARAMS, /params/);
      // Envelope errors keep the id when there is one.
      assertRpcError(await rp.rpc(p, { jsonrpc: "1.0", id: 3, method: "ping" }), 3, INVALID_REQUEST, /jsonrpc/);
      // A batch is refused as a whole, once, with id null.
      const batch = await rp.rpc(p, [{ jsonrpc: "2.0", id: "b1", method: "ping" }, { jsonrpc: "2.0", id: "b2", method: "ping" }], null);
      assertRpcError(batch, null, INVALID_REQUEST, /batch/i);
      await sleep(200);
      assert.ok(!(await rp.messages(p)).some((x) => x.id === "b1" || x.id === "b2"), "no batch element was answered");

      const info = await rp.info(p);
      assert.equal(info.closed, false, "protocol errors do not close the port");
    } finally {
      await rp.close(p);
    }
  });

  // MCP 2025-03-26 (only that revision) says a receiver MUST take JSON-RPC batches.
  test("8d. a session at 2025-03-26 takes a batch: one array of answers, in order, notifications unanswered", T, async () => {
    const p = await rp.open();
    try {
      const init = await rp.rpc(p, initialize("init-0326", "2025-03-26"));
      assert.equal(init.result.protocolVersion, "2025-03-26");
      await rp.send(p, initialized);
      const before = (await rp.messages(p)).length;
      await rp.send(p, [
        { jsonrpc: "2.0", id: "b1", method: "ping" },
        { jsonrpc: "2.0", method: "notifications/initialized" },
        { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "status", arguments: {} } },
        { jsonrpc: "2.0", id: "b3", method: "no/such" },
      ]);
      const fresh = await until(async () => (await rp.messages(p)).slice(before), (l) => l.length > 0, 3000);
      await sleep(200);
      const all = (await rp.messages(p)).slice(before);
      assert.equal(all.length, 1, `one message answers the batch: ${show(all)}`);
      const [answers] = fresh;
      assert.ok(Array.isArray(answers), show(answers));
      assert.deepEqual(answers.map((a) => a.id), ["b1", 2, "b3"], show(answers));
      assert.deepEqual(answers[0].result, {});
      assert.equal(answers[1].result.isError, false);
      assert.equal(answers[1].result.structuredContent.version.length > 0, true, show(answers[1]));
      assertRpcError(answers[2], "b3", METHOD_NOT_FOUND, /no\/such/);
      // Empty: one error object, not an array.
      assertRpcError(await rp.rpc(p, [], null), null, INVALID_REQUEST, /empty batch/);
      assert.equal((await rp.info(p)).closed, false);
    } finally {
      await rp.close(p);
    }
  });

  // Chrome delivers a message of up to 64 MiB; a port message holds at most 1 MiB and a probe
  // 16 KiB. A longer one is answered from its beginning (the request's id) without its text
  // being copied into the wasm, whose memory never shrinks: any extension may send a probe.
  test("8c. a 32 MiB port message and probe are refused by size without growing the worker's memory", T, async () => {
    const p = await rp.open();
    try {
      await rp.rpc(p, { jsonrpc: "2.0", id: "warm", method: "ping" });
      assert.ok(!(await h.internal("state.get")).error);
      const before = await h.workerWasmMemory();
      const host = await h.hostPage();
      const probes = await host.evaluate(async ([id, handle]) => {
        const pad = "x".repeat(32 << 20);
        window.lumo.rawSend(handle, { jsonrpc: "2.0", id: "big", method: "ping", params: { pad } });
        return Promise.all([0, 1, 2].map(() => chrome.runtime.sendMessage(id, { channel: "lumo:probe", version: 1, pad })));
      }, [PROVIDER_ID, p]);
      for (const r of probes) {
        assert.equal(r.ok, false, show(r));
        assert.match(r.error, /bytes is over the 16384-byte limit/, show(r));
      }
      const fresh = await until(() => rp.messages(p), (l) => l.some((m) => m.id === "big"), 5000);
      assertRpcError(fresh.find((m) => m.id === "big"), "big", INVALID_REQUEST, /over the 1048576-byte limit/);
      const grown = (await h.workerWasmMemory()) - before;
      assert.ok(grown < 4 << 20, `the wasm grew by ${grown} bytes`);
      assert.deepEqual((await rp.rpc(p, { jsonrpc: "2.0", id: "after", method: "ping" })).result, {});
    } finally {
      await rp.close(p);
    }
  });

  test("8b. a batch sent before authorization completes is answered -32600, never echoed back", T, async () => {
    // The worker is stopped first so the next start reads the policy from storage: the batch,
    // sent in the same turn as the connect, arrives while that read runs and is buffered.
    // A buffered one-element batch used to look like a buffered error reply and was posted back.
    const page = await h.hostPage();
    const batch = [{ jsonrpc: "2.0", id: "batch-ping", method: "ping" }];
    for (let n = 1; n <= 3; n++) {
      await h.stopProviderWorker();
      const { p, sent } = await page.evaluate(([id, name, msgs]) => {
        const p = window.lumo.rawOpen(id, name);
        return { p, sent: msgs.map((msg) => window.lumo.rawSend(p, msg)) };
      }, [PROVIDER_ID, MCP_PORT, [batch, initialize(`after-batch-${n}`)]]);
      assert.equal(typeof p, "number", `rawOpen failed: ${show(p)}`);
      assert.deepEqual(sent, [{ sent: true }, { sent: true }]);
      const msgs = await until(() => rp.messages(p), (l) => l.length >= 2, 5000);
      assert.equal(msgs.length, 2, `#${n}: one answer to the batch, one to initialize: ${show(msgs)}`);
      assert.ok(!msgs.some((x) => "method" in x), `#${n}: the batch was echoed back: ${show(msgs)}`);
      assertRpcError(msgs[0], null, INVALID_REQUEST, /batch/i);
      assert.equal(msgs[1].id, `after-batch-${n}`);
      assert.ok(msgs[1].result, `#${n}: the port works on: ${show(msgs[1])}`);
      await rp.close(p);
    }
  });

  test("4. wrong port names are disconnected at once, with no reply", T, async () => {
    await m.noHostSessions();
    for (const name of ["lumo:mcp2", "", "lumo:probe"]) {
      const t0 = Date.now();
      const p = await rp.open(name);
      // May already be closed; a send error is fine, a reply is not.
      await h.lumo("rawSend", p, initialize("wrong-name"));
      const info = await until(() => rp.info(p), (i) => i.closed, 2000);
      const elapsed = Date.now() - t0;
      assert.equal(info.closed, true, `port ${show(name)} disconnected: ${show(info)}`);
      assert.ok(elapsed < 1000, `port ${show(name)} disconnected after ${elapsed} ms`);
      await sleep(300);
      assert.deepEqual(await rp.messages(p), [], `no reply on port ${show(name)}`);
      assert.deepEqual(await m.hostSessions(), [], `no session for port ${show(name)}`);
    }
  });

  test("3. endpoint off, then on; caller removed: connect without probing is refused with -32001 and the reason", T, async () => {
    await h.internal("policy.setSwitch", { name: "endpoint", value: false });
    try {
      const r = await h.lumo("connect", PROVIDER_ID);
      assert.equal(typeof r, "object", `connect must fail while the endpoint is off: ${show(r)}`);
      assert.equal(r.error?.code, UNAUTHORIZED, show(r));
      assert.match(r.error.message, /turned off/i);
      const i = await until(() => m.info(r.handle), (x) => !x.connected && x.lastCloseReason !== null, 2000);
      assert.equal(i.connected, false);
      assert.equal(typeof i.lastCloseReason, "string");
      await m.close(r.handle);
    } finally {
      await h.internal("policy.setSwitch", { name: "endpoint", value: true });
    }
    const s = await m.connect();
    await m.ok(s, "status");
    await m.close(s);

    await h.internal("policy.remove", { id: HOST_ID });
    try {
      const r = await h.lumo("connect", PROVIDER_ID);
      assert.equal(typeof r, "object", `connect must fail once the caller is removed: ${show(r)}`);
      assert.equal(r.error?.code, UNAUTHORIZED, show(r));
      assert.match(r.error.message, /not on the .*allowlist/i);
      const i = await until(() => m.info(r.handle), (x) => !x.connected && x.lastCloseReason !== null, 2000);
      assert.equal(i.connected, false);
      await m.close(r.handle);
    } finally {
      await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
    }
    const again = await m.connect();
    await m.ok(again, "status");
    await m.close(again);
  });

  test("3b. a refusal at connect time always carries its reason: 300 connects with the endpoint off", { timeout: 180_000 }, async () => {
    // Same check as 3, repeated: the reason must reach the host every time, not only when the
    // host's initialize happens to arrive before the provider's authorization read completes.
    const failures = [];
    await h.internal("policy.setSwitch", { name: "endpoint", value: false });
    try {
      // The race is timing-dependent (a few per cent of connects under load): 300 attempts.
      for (let n = 1; n <= 300; n++) {
        const r = await h.lumo("connect", PROVIDER_ID);
        if (typeof r === "number") {
          failures.push(`#${n}: connected`);
          await m.close(r);
          continue;
        }
        if (r.error?.code !== UNAUTHORIZED || !/turned off/i.test(r.error.message)) failures.push(`#${n}: ${show(r.error)}`);
        await m.close(r.handle);
      }
    } finally {
      await h.internal("policy.setSwitch", { name: "endpoint", value: true });
    }
    assert.deepEqual(failures, []);
  });

  test("5. policy flipped mid-session: every port of the caller closes at once, and reconnecting is refused with the reason", T, async () => {
    await m.noHostSessions();
    // No listTools on these sessions: the SDK then returns the result as sent (see 1b for the other path).
    const s = await m.connect();
    const other = await m.connect();
    try {
      await m.ok(s, "status");
      await m.ok(other, "status");

      // Endpoint switched off.
      await h.internal("policy.setSwitch", { name: "endpoint", value: false });
      try {
        // No call needed: the switch itself closes the caller's ports.
        const i = await until(() => m.info(s), (x) => !x.connected, 2000);
        assert.equal(i.connected, false, `the port closed when the endpoint went off: ${show(i)}`);
        assert.equal(typeof i.lastCloseReason, "string");
        const io = await until(() => m.info(other), (x) => !x.connected, 2000);
        assert.equal(io.connected, false, `the caller's other port closed too: ${show(io)}`);
        assert.deepEqual(await until(m.hostSessions, (l) => l.length === 0, 2000), []);
        // Still off: the lazy reconnect's initialize is refused.
        const re = await m.call(s, "status");
        assert.equal(re.error?.code, UNAUTHORIZED, `reconnect while off: ${show(re)}`);
        assert.match(re.error.message, /turned off/i);
      } finally {
        await h.internal("policy.setSwitch", { name: "endpoint", value: true });
      }
      await m.ok(s, "status");
      assert.equal((await m.info(s)).reconnects, 1);
      assert.equal((await m.info(s)).connected, true);

      // Caller removed from the allowlist.
      await h.internal("policy.remove", { id: HOST_ID });
      try {
        const i = await until(() => m.info(s), (x) => !x.connected, 2000);
        assert.equal(i.connected, false, `the port closed at the removal: ${show(i)}`);
        assert.deepEqual(await until(m.hostSessions, (l) => l.length === 0, 2000), []);
        const r = await m.call(s, "status");
        assert.equal(r.error?.code, UNAUTHORIZED, `reconnect after the removal: ${show(r)}`);
        assert.match(r.error.message, /allowlist/i);
      } finally {
        await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
      }
      await m.ok(s, "status");
      assert.equal((await m.info(s)).reconnects, 2);
    } finally {
      await m.close(s);
      await m.close(other);
    }
  });

  test("6. writes switch: list_changed, write tools hidden, WRITE_DISABLED, then back", T, async () => {
    const s = await m.connect();
    try {
      assert.deepEqual(sorted((await m.list(s)).map((t) => t.name)), ALL_TOOLS);
      const count0 = (await m.info(s)).listChangedCount;
      const scripts0 = (await m.ok(s, "status")).structuredContent.scriptCount;

      await h.internal("policy.setSwitch", { name: "writes", value: false });
      try {
        const i = await until(() => m.info(s), (x) => x.listChangedCount > count0, 2000);
        assert.equal(i.listChangedCount, count0 + 1, "one notifications/tools/list_changed");
        assert.deepEqual(sorted((await m.list(s)).map((t) => t.name)), READ_TOOLS, "write tools hidden");

        const r = await m.call(s, "write_script", { source: userscript("e2e while read-only") });
        assertToolError(r, "WRITE_DISABLED", /read-only|turned off/i);
        assert.equal(r.structuredContent.status, 403);

        const st = await m.ok(s, "status");
        assert.equal(st.structuredContent.writesEnabled, false);
        assert.equal(st.structuredContent.scriptCount, scripts0, "nothing stored");
        const found = await m.ok(s, "list_scripts", { query: "e2e while read-only" });
        assert.equal(found.structuredContent.total, 0);

        // Not an authorization failure: the session stays up.
        const after = await m.info(s);
        assert.equal(after.connected, true);
        assert.equal(after.reconnects, 0);

        // A session opened now is told it is read-only.
        const fresh = await m.connect();
        assert.match((await m.info(fresh)).instructions, /read-only/i);
        await m.close(fresh);
      } finally {
        await h.internal("policy.setSwitch", { name: "writes", value: true });
      }
      const i = await until(() => m.info(s), (x) => x.listChangedCount > count0 + 1, 2000);
      assert.equal(i.listChangedCount, count0 + 2, "list_changed again when writes come back");
      assert.deepEqual(sorted((await m.list(s)).map((t) => t.name)), ALL_TOOLS, "write tools back");

      const w = await m.ok(s, "write_script", { source: userscript("e2e after read-only") });
      assert.equal(w.structuredContent.created, true);
      const { uuid, revision } = w.structuredContent.script;
      const d = await m.ok(s, "delete_script", { uuid, revision });
      assert.equal(d.structuredContent.deleted, true);
    } finally {
      await m.close(s);
    }
  });

  test("9. sessions.disconnect closes the host's port; the next call reconnects", T, async () => {
    await m.noHostSessions();
    const s = await m.connect();
    try {
      await m.ok(s, "status");
      assert.equal((await m.hostSessions()).length, 1);

      const none = await h.internal("sessions.disconnect", { id: ABSENT_ID });
      assert.equal(none.closed, 0);
      assert.equal((await m.info(s)).connected, true, "disconnecting another id leaves the host alone");

      const res = await h.internal("sessions.disconnect", { id: HOST_ID });
      assert.equal(res.closed, 1, show(res));
      const i = await until(() => m.info(s), (x) => !x.connected, 2000);
      assert.equal(i.connected, false, `the host saw the close: ${show(i)}`);
      assert.equal(typeof i.lastCloseReason, "string");
      assert.deepEqual(await until(m.hostSessions, (l) => l.length === 0, 2000), []);

      const r = await m.ok(s, "status");
      assert.equal(r.structuredContent.writesEnabled, true);
      const j = await m.info(s);
      assert.equal(j.connected, true);
      assert.equal(j.reconnects, 1);
      const open = await m.hostSessions();
      assert.equal(open.length, 1);
      assert.equal(open[0].state, "ready");
    } finally {
      await m.close(s);
    }
  });

  test("7. worker recycled 10 times mid-session: each next call reconnects with a fresh initialize", { timeout: 180_000 }, async () => {
    const s = await m.connect();
    try {
      const first = await m.ok(s, "status");
      const version = first.structuredContent.version;
      for (let n = 1; n <= 10; n++) {
        await h.stopProviderWorker();
        const closed = await until(() => m.info(s), (x) => !x.connected, 3000);
        assert.equal(closed.connected, false, `#${n}: the host saw the port close when the worker stopped`);

        const r = await m.call(s, "status");
        assert.ok(!r.error, `#${n}: call after the worker stopped: ${show(r.error)}`);
        assert.equal(r.isError, false, `#${n}: ${show(r)}`);
        assert.equal(r.structuredContent.version, version);
        const i = await m.info(s);
        assert.equal(i.connected, true, `#${n}`);
        assert.equal(i.reconnects, n, `#${n}: reconnects`);
        assert.equal(i.protocolVersion, LATEST_PROTOCOL_VERSION, `#${n}`);
        assert.equal(i.serverInfo?.name, "lumo-userscripts", `#${n}`);
        assert.equal(await h.workerStatus(), "running", `#${n}: the reconnect restarted the worker`);
        const open = await m.hostSessions();
        assert.equal(open.length, 1, `#${n}: one port after the restart: ${show(open)}`);
        assert.equal(open[0].state, "ready", `#${n}`);
      }
    } finally {
      await m.close(s);
    }
  });

  test("the provider logged no panic", T, () => { assert.deepEqual(panics, []); });
});
