// Values fixed by the extension-protocol contract, written out independently of the host
// implementation so the tests check the host against the contract, not against itself.
export const PROBE_CHANNEL = "lumo:probe";
export const MCP_PORT = "lumo:mcp";
export const PROBE_VERSION = 1;
export const PROBE_TIMEOUT_MS = 1500;

export const TEXT = {
  notInstalled: "Extension not installed, or no agent endpoint.",
  timeout: `Probe timed out after ${PROBE_TIMEOUT_MS} ms`,
  incomplete: "Probe response is incomplete.",
  disabled: "Agent access is turned off in the provider.",
  pending: "Waiting for your approval in the provider.",
  notAllowed: "The caller is not on the allowlist.",
};
