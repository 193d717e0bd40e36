// Node 20 lacks fs.globSync (22+), which the conformance suite imports. The suite only globs
// `**/<file name>`; this adds that much and re-exports the rest of node:fs unchanged.
import fs from 'node:fs';
import path from 'node:path';
export * from 'node:fs';
export default fs;
export function globSync(pattern, { cwd = '.' } = {}) {
  if (typeof fs.globSync === 'function') return fs.globSync(pattern, { cwd });
  const name = String(pattern).replace(/^\*\*\//, '');
  const out = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(path.join(cwd, dir), { withFileTypes: true })) {
      const rel = dir ? `${dir}/${e.name}` : e.name;
      if (e.isDirectory()) walk(rel);
      else if (e.name === name) out.push(rel);
    }
  };
  walk('');
  return out;
}
