// The byte length of the provider's WebAssembly.Memory (what the wasm has grown to: it never
// shrinks), read from its running worker over a CDP session to that worker.
//
// Not with Runtime.queryObjects: it walks the whole heap on the worker's thread, and under load
// (one core held busy) that thread sometimes never answered again until Chrome stopped the
// worker ~30 s later (gm.test.mjs, 1 run in 7; and once in CI). Here the memory is reached the
// way DevTools shows a closure's variables, with no heap walk: sw.js's own `unhandledrejection`
// listener → its module scope → `init` (imported from the wasm-bindgen glue) → the glue's module
// scope → `wasm`, the instance's exports. Each missing step fails saying which, so a change to
// sw.js that breaks the path is named, not measured as zero.

/** `send(method, params)`: a CDP command on the worker's session, resolving to its result. */
export async function providerWasmMemory(send) {
  const listener = await send("Runtime.evaluate", { expression: "getEventListeners(self).unhandledrejection?.[0]?.listener", includeCommandLineAPI: true });
  if (listener.result?.type !== "function") throw new Error("providerWasmMemory: sw.js has no unhandledrejection listener to start from");
  const init = await moduleVariable(send, listener.result.objectId, "init", "sw.js");
  const wasm = await moduleVariable(send, init.objectId, "wasm", "the wasm-bindgen glue");
  const size = await send("Runtime.callFunctionOn", {
    objectId: wasm.objectId,
    returnByValue: true,
    functionDeclaration: "function () { return this.memory instanceof WebAssembly.Memory ? this.memory.buffer.byteLength : null; }",
  });
  if (typeof size.result?.value !== "number") throw new Error("providerWasmMemory: the glue's `wasm` has no WebAssembly.Memory");
  return size.result.value;
}

/** The value of `name` in the module scope of the function `functionId` (from its [[Scopes]]). */
async function moduleVariable(send, functionId, name, where) {
  const fn = await send("Runtime.getProperties", { objectId: functionId, ownProperties: true });
  const scopes = fn.internalProperties?.find((p) => p.name === "[[Scopes]]")?.value?.objectId;
  if (!scopes) throw new Error(`providerWasmMemory: no [[Scopes]] on a function of ${where}`);
  const list = await send("Runtime.getProperties", { objectId: scopes, ownProperties: true });
  const module = list.result.find((s) => s.value?.description === "Module")?.value?.objectId;
  if (!module) throw new Error(`providerWasmMemory: no module scope in ${where}`);
  const vars = await send("Runtime.getProperties", { objectId: module, ownProperties: true });
  const found = vars.result.find((v) => v.name === name)?.value;
  if (!found?.objectId) throw new Error(`providerWasmMemory: no \`${name}\` in the module scope of ${where}`);
  return found;
}
