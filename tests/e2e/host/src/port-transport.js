// An MCP SDK Transport over a chrome.runtime.Port (the contract's L1).
import { JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";

export class PortTransport {
  /** @param {string} providerId  @param {string} portName */
  constructor(providerId, portName) {
    this.providerId = providerId;
    this.portName = portName;
    this.port = null;
    this.closed = false;
    this.closeReason = null;
    this.protocolVersion = null;
    this.onmessage = undefined;
    this.onclose = undefined;
    this.onerror = undefined;
  }

  async start() {
    if (this.port) throw new Error("PortTransport already started");
    this.port = chrome.runtime.connect(this.providerId, { name: this.portName });
    this.port.onMessage.addListener((raw) => {
      const parsed = JSONRPCMessageSchema.safeParse(raw);
      if (!parsed.success) {
        this.onerror?.(new Error(`Invalid JSON-RPC message from provider: ${JSON.stringify(raw)}`));
        return;
      }
      this.onmessage?.(parsed.data);
    });
    this.port.onDisconnect.addListener(() => {
      // Reading lastError also keeps Chrome from logging it as unchecked.
      const err = chrome.runtime.lastError;
      this._finish(err?.message ?? "Port disconnected by the provider");
    });
  }

  async send(message) {
    if (!this.port || this.closed) throw new Error("Port is closed");
    this.port.postMessage(message);
  }

  async close() {
    if (this.closed) return;
    try { this.port?.disconnect(); } catch { /* already gone */ }
    this._finish("Closed by host");
  }

  // Called by the SDK Client after initialize.
  setProtocolVersion(version) {
    this.protocolVersion = version;
  }

  _finish(reason) {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = reason;
    this.onclose?.();
  }
}
