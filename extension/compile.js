// The loader's first step, in a module of its own: sw.js imports it before the wasm-bindgen glue,
// so the .wasm's fetch and streaming compile start before the glue is evaluated.
export const wasm = WebAssembly.compileStreaming(fetch(new URL('./wasm/lumo_userscripts_bg.wasm', import.meta.url)));
