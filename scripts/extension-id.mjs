// Prints where the built extension is and its id: sha256 of the manifest key (DER public key),
// first 32 hex digits mapped 0-f -> a-p. This is the id users paste into the host.
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';

export function extensionId(manifestPath) {
  const { key } = JSON.parse(readFileSync(manifestPath, 'utf8'));
  const hex = createHash('sha256').update(Buffer.from(key, 'base64')).digest('hex').slice(0, 32);
  return [...hex].map((c) => String.fromCharCode(97 + parseInt(c, 16))).join('');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [manifest, dist] = process.argv.slice(2);
  console.log(`Built ${resolve(dist)}`);
  console.log(`Extension id: ${extensionId(manifest)}`);
}
