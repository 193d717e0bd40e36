// The official MCP TypeScript SDK client launches the real bridge over stdio (as Claude Code or
// Claude Desktop would) and, over --http, the SDK's Streamable HTTP client with the bearer token.
// The SDK is the judge of wire correctness: it validates every result against its schemas.
// Run: node --test tests/bridge/   (after `cargo build -p lumo-bridge`; LUMO_BRIDGE_BIN overrides).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { freePorts } from '../lib/ports.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const bin = process.env.LUMO_BRIDGE_BIN ?? path.join(root, 'target/debug/lumo-bridge');
const TOKEN = 'node-test-token-0123456789abcdef0123456789';
const WRITES = ['write_script', 'patch_script', 'set_script_enabled', 'delete_script', 'restore_script', 'try_script'];

/** Each bridge's state directory, removed when the file's tests end. */
const stateDirs = [];
after(() => { for (const dir of stateDirs) fs.rmSync(dir, { recursive: true, force: true }); });

/** `ports` are the extension and control ports, taken together so that they differ. */
async function bridgeArgs(extra = [], ports) {
  const [port, control] = ports ?? await freePorts(2);
  const state = fs.mkdtempSync(path.join(os.tmpdir(), 'lumo-bridge-node-'));
  stateDirs.push(state);
  return ['--port', String(port), '--control-port', String(control),
    '--state-dir', state, '--token', TOKEN, ...extra];
}

async function stdioClient(extra) {
  const transport = new StdioClientTransport({ command: bin, args: await bridgeArgs(extra), stderr: 'pipe' });
  const client = new Client({ name: 'bridge-test', version: '0' });
  await client.connect(transport);
  return client;
}

test('stdio: initialize, tools/list is the catalogue plus bridge_status, status says how to connect', async () => {
  const client = await stdioClient();
  try {
    assert.equal(client.getServerVersion().name, 'lumo-userscripts-bridge');
    assert.match(client.getInstructions() ?? '', /untrusted/);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['status', 'list_scripts', 'get_script', 'list_revisions', 'validate_script', 'match_url', 'script_runs', ...WRITES, 'bridge_status']) {
      assert.ok(names.includes(n), `${n} listed`);
    }
    const del = tools.find((t) => t.name === 'delete_script');
    assert.equal(del.annotations.destructiveHint, true);
    const status = await client.callTool({ name: 'bridge_status', arguments: {} });
    assert.equal(status.isError, false);
    assert.equal(status.structuredContent.connected, false);
    assert.match(status.structuredContent.connectLink,
      /^chrome-extension:\/\/imliakfdgonldkmaddnhnniclbhiobpo\/connect\.html\?port=\d+&token=/);
    // Not connected: a readable tool error, which the SDK accepts against the output schema.
    const r = await client.callTool({ name: 'list_scripts', arguments: {} });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /not connected.*connect\.html/s);
    // An unknown tool is a protocol error.
    await assert.rejects(client.callTool({ name: 'nope', arguments: {} }));
  } finally {
    await client.close();
  }
});

test('stdio --readonly: write tools are neither listed nor callable', async () => {
  const client = await stdioClient(['--readonly']);
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const w of WRITES) assert.ok(!names.includes(w), `${w} hidden`);
    const r = await client.callTool({ name: 'delete_script', arguments: { uuid: '00000000-0000-0000-0000-000000000000' } });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, 403);
    assert.equal(r.structuredContent.error_code, 'WRITE_DISABLED');
  } finally {
    await client.close();
  }
});

test('http: the SDK client with the bearer token works; without it the connection is refused', async () => {
  const [port, ...bridgePorts] = await freePorts(3);
  const child = spawn(bin, await bridgeArgs(['--http', String(port)], bridgePorts), { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    await new Promise((resolve, reject) => {
      let err = '';
      child.stderr.on('data', (d) => { err += d; if (err.includes('MCP over HTTP')) resolve(); });
      child.on('exit', () => reject(new Error(`bridge exited: ${err}`)));
    });
    const url = new URL(`http://127.0.0.1:${port}/mcp`);
    const bad = new Client({ name: 'no-token', version: '0' });
    await assert.rejects(bad.connect(new StreamableHTTPClientTransport(url)));
    const client = new Client({ name: 'bridge-test', version: '0' });
    await client.connect(new StreamableHTTPClientTransport(url, {
      requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
    }));
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes('bridge_status'));
    const s = await client.callTool({ name: 'bridge_status', arguments: {} });
    assert.equal(s.structuredContent.connected, false);
    await client.close();
  } finally {
    child.kill();
  }
});
