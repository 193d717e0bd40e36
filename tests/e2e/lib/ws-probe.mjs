// A minimal WebSocket server (RFC 6455, text and close frames only) that records what the
// extension sends: the upgrade request (URL, Origin) and every frame, so tests can check what
// never appears in a URL and which close code a Disconnect sends. It plays the bridge's part
// of the hello when `ack` is given: with `token`, as a genuine bridge does (its nonce and its
// proof of the token, then `ack` — which may refuse — once the extension's proof holds); without, by answering the
// hello with `ack` itself (a refusal, or something else on the port that cannot prove the
// token). Not a bridge: the real one is bridge/.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const NONCE = "ws-probe-nonce-0123456789abcdef";

/** `trust::proof` (src/bridge/trust.rs), written again here from its documentation. */
export function bridgeProof(token, role, helloType, port, dialNonce, acceptNonce) {
  const label = role === "accept" ? "lumo-bridge accept" : "lumo-bridge dial";
  return createHmac("sha256", token).update([label, helloType, String(port), dialNonce, acceptNonce].map((p) => `${p}\n`).join("")).digest("hex");
}

export async function startWsProbe({ ack, token, flood } = {}) {
  const seen = { upgrades: [], frames: [], closes: [], proofs: [] };
  let port = 0;
  const sockets = new Set();
  const server = createServer((_, res) => res.writeHead(426).end());
  server.on("upgrade", (req, socket) => {
    seen.upgrades.push({ url: req.url, origin: req.headers.origin, host: req.headers.host });
    const accept = createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    sockets.add(socket);
    let buf = Buffer.alloc(0);
    socket.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (buf.length < 2) return;
        const op = buf[0] & 0x0f;
        let len = buf[1] & 0x7f;
        let off = 2;
        if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
        else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
        if (buf.length < off + 4 + len) return;
        const mask = buf.subarray(off, off + 4);
        const data = Buffer.from(buf.subarray(off + 4, off + 4 + len));
        for (let i = 0; i < data.length; i++) data[i] ^= mask[i % 4];
        buf = buf.subarray(off + 4 + len);
        if (op === 1) {
          const text = data.toString("utf8");
          seen.frames.push(text);
          const f = JSON.parse(text);
          // `flood`: answer the hello with one text message of that many bytes (a JSON string),
          // as whatever listens on the port may.
          if (flood && f.k === "req" && f.type === "hello") sendText(socket, `"${"x".repeat(flood - 2)}"`);
          if (ack && f.k === "req" && f.type === "hello") {
            const result = token
              ? { ok: true, protocol: ack.protocol, serverVersion: ack.serverVersion, nonce: NONCE, proof: bridgeProof(token, "accept", "hello", port, f.payload.nonce, NONCE) }
              : ack;
            socket.lumoNonce = f.payload.nonce;
            send(socket, { k: "res", id: f.id, ok: true, result });
          }
          if (token && f.k === "req" && f.type === "hello_proof") {
            const want = Buffer.from(bridgeProof(token, "dial", "hello", port, socket.lumoNonce, NONCE));
            const got = Buffer.from(String(f.payload?.proof ?? ""));
            const good = got.length === want.length && timingSafeEqual(got, want);
            seen.proofs.push(good);
            send(socket, { k: "res", id: f.id, ok: true, result: good ? ack : { ok: false, protocol: ack.protocol, reason: "wrong or missing token" } });
          }
          if (f.k === "png") send(socket, { k: "pog" });
        } else if (op === 8) {
          seen.closes.push({ code: data.length >= 2 ? data.readUInt16BE(0) : null, reason: data.subarray(2).toString("utf8") });
          socket.end();
        }
      }
    });
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  port = server.address().port;
  return {
    port,
    seen,
    request: (socketIndex, frame) => send([...sockets][socketIndex ?? 0], frame),
    close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(r); }),
  };
}

/** One text message of any length (64-bit length when it needs one). */
function sendText(socket, text) {
  const data = Buffer.from(text);
  const head = Buffer.alloc(10);
  head[0] = 0x81;
  head[1] = 127;
  head.writeBigUInt64BE(BigInt(data.length), 2);
  socket.write(Buffer.concat([head, data]));
}

function send(socket, obj) {
  const data = Buffer.from(JSON.stringify(obj));
  const head = data.length < 126 ? Buffer.from([0x81, data.length])
    : Buffer.from([0x81, 126, data.length >> 8, data.length & 0xff]);
  socket.write(Buffer.concat([head, data]));
}
