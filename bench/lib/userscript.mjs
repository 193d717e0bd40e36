// The bench's write fixture, shared by bench/run.mjs and bench/ab.mjs.

/** A realistic ~5 KiB userscript; `edit` changes its @version. */
export function userscript(i, edit = 0) {
  const lines = [
    "// ==UserScript==",
    `// @name         Bench script ${String(i).padStart(4, "0")}`,
    "// @namespace    https://bench.lumo.invalid/",
    `// @version      1.0.${edit}`,
    "// @description  Tidies article text and marks long paragraphs (a bench fixture of realistic size).",
    // One pattern per list, as since the first bench: Chrome returns match lists sorted (the
    // reconcile compares them as sets, `registry::same_effect`).
    "// @match        https://*.example.org/articles/*",
    "// @exclude-match https://*.example.org/articles/drafts/*",
    "// @run-at       document-idle",
    "// @grant        none",
    "// ==/UserScript==",
    "(() => {",
    "  'use strict';",
  ];
  for (let k = 0; lines.join("\n").length < 5000; k++) {
    lines.push(
      `  function tidy${k}(root) {`,
      `    for (const el of root.querySelectorAll("[data-bench-${k}]")) {`,
      `      el.textContent = el.textContent.trim().replace(/\\s+/g, " ");`,
      `      el.classList.toggle("bench-long-${k}", el.textContent.length > ${(k * 37) % 400});`,
      "    }",
      "  }",
    );
  }
  lines.push("  for (const f of [" + lines.filter((l) => l.startsWith("  function")).map((l) => l.slice(11, l.indexOf("("))).join(", ") + "]) f(document);", "})();", "");
  return lines.join("\n");
}
