// The conformance suite's client sends no Authorization header; the bridge requires one. This
// pass-through proxy adds `Authorization: Bearer $TOKEN` and nothing else, streaming both ways.
// Usage: node auth-proxy.mjs LISTEN_PORT TARGET_PORT   (TOKEN in the environment)
import http from 'node:http';

const [listen, target] = process.argv.slice(2).map(Number);
const token = process.env.TOKEN;
http.createServer((req, res) => {
  const up = http.request({
    host: '127.0.0.1', port: target, method: req.method, path: req.url,
    headers: { ...req.headers, authorization: `Bearer ${token}` },
  }, (r) => { res.writeHead(r.statusCode, r.headers); r.pipe(res); });
  up.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
  req.pipe(up);
}).listen(listen, '127.0.0.1', () => console.error(`auth-proxy on ${listen} → ${target}`));
