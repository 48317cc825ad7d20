// The `pallas-lsp` settings section, as the server sees it.
//
// Every server option of docs/configuration.md is contributed under the same
// name (`pallas-lsp.rules.select`, `pallas-lsp.diagnostics.debounceMs`, ...).
// A few settings are the client's own (which interpreter starts the server,
// message tracing): they are removed before the section reaches the server,
// which would otherwise warn about unknown keys.
import * as vscode from "vscode";

export const SECTION = "pallas-lsp";

/** Top-level keys of the section that only the client reads. */
export const CLIENT_ONLY_KEYS: readonly string[] = ["interpreter", "trace"];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function plain(value: unknown): Json {
  // WorkspaceConfiguration objects carry methods and proxies: keep data only.
  return value === undefined ? null : (JSON.parse(JSON.stringify(value)) as Json);
}

/** The section's value without the client-only keys. */
export function forServer(value: unknown): Json {
  const data = plain(value);
  if (data === null || typeof data !== "object" || Array.isArray(data)) {
    return data;
  }
  const out: { [key: string]: Json } = {};
  for (const [key, item] of Object.entries(data)) {
    if (!CLIENT_ONLY_KEYS.includes(key) && !CLIENT_ONLY_KEYS.some((k) => key.startsWith(k + "."))) {
      out[key] = item;
    }
  }
  return out;
}

/** What the server gets as initializationOptions: the whole section for
 * `resource` (or the window), nested, without the client-only keys. */
export function serverSettings(resource?: vscode.Uri): Json {
  const config = vscode.workspace.getConfiguration(undefined, resource);
  return forServer(config.get(SECTION));
}
