// Free loopback ports for the bridge's --port and --control-port. All n listeners stay open until
// every one is bound: a port closed before the next bind(0) can be handed out again (seen here:
// 2 pairs in 5,000 came back equal, and the bridge refuses equal ports at start).
import net from "node:net";

/** n distinct free ports on 127.0.0.1. */
export async function freePorts(n) {
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      servers.push(s);
      await new Promise((resolve, reject) => {
        s.once("error", reject);
        s.listen(0, "127.0.0.1", resolve);
      });
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => (s.listening ? s.close(() => r()) : r()))));
  }
}
