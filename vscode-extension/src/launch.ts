// How the extension starts Python: the install check and the server itself.
//
// Neither may import a file of the opened folder. `python -c` and
// `python -m` put their working directory first on the import path, so a
// repository's `json.py`, `sitecustomize.py` or `pallas_lsp.py` would run,
// with the user's rights, as soon as the folder is opened, trusted or not.
// So both start in an empty folder private to this extension host, with
// safe-path on (`PYTHONSAFEPATH=1` for the check, which any Python accepts;
// `-P` for the server, which needs 3.11 like pallas-lsp itself, and is not
// inherited by the runs the server starts on the user's command).
//
// No `vscode` import here: tests/test_workspace_isolation.py bundles
// this file and runs it in plain Node against a hostile folder.
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export type Probe =
  | { kind: "ok"; version: string; executable: string }
  | { kind: "not-installed"; executable: string; detail: string }
  | { kind: "no-python"; detail: string };

// Prints sys.executable, then pallas-lsp's version. A Python older than 3.11
// cannot hold pallas-lsp (nor take `-P`): say so instead of a bare ImportError.
export const PROBE = [
  "import sys",
  "sys.stdout.write(sys.executable + '\\n')",
  "sys.version_info >= (3, 11) or sys.exit('pallas-lsp needs Python 3.11 or newer; this is ' + sys.version.split()[0])",
  "import pallas_lsp",
  "sys.stdout.write(getattr(pallas_lsp, '__version__', '?'))",
].join("; ");

/** The server's arguments after the interpreter. */
export const SERVER_ARGS: readonly string[] = ["-P", "-m", "pallas_lsp", "serve"];

let privateDir: string | undefined;

/** An empty folder only this user can write (mkdtemp makes it 0700), made once. */
export function neutralCwd(): string {
  if (privateDir === undefined || !fs.existsSync(privateDir)) {
    privateDir = fs.mkdtempSync(path.join(os.tmpdir(), "pallas-lsp-cwd-"));
  }
  return privateDir;
}

/** Removes the folder (on deactivation). */
export function removeNeutralCwd(): void {
  if (privateDir !== undefined) {
    fs.rmSync(privateDir, { recursive: true, force: true });
    privateDir = undefined;
  }
}

/** Runs the install check in `command` and says what happened. */
export function probe(command: string, env: NodeJS.ProcessEnv): Promise<Probe> {
  const options = { env: { ...env, PYTHONSAFEPATH: "1" }, cwd: neutralCwd(), timeout: 30_000, windowsHide: true };
  return new Promise((resolve) => {
    execFile(command, ["-c", PROBE], options, (error, stdout, stderr) => {
      const [executable = command, version = ""] = String(stdout).split("\n");
      if (!error) {
        resolve({ kind: "ok", version: version.trim(), executable: executable.trim() || command });
        return;
      }
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "EACCES" || !String(stdout).trim()) {
        resolve({ kind: "no-python", detail: String(stderr).trim() || error.message });
        return;
      }
      resolve({ kind: "not-installed", executable: executable.trim(), detail: String(stderr).trim() });
    });
  });
}

/** What the language client spawns once the check passed. */
export function serverCommand(executable: string, env: NodeJS.ProcessEnv):
  { command: string; args: string[]; options: { cwd: string; env: NodeJS.ProcessEnv } } {
  return { command: executable, args: [...SERVER_ARGS], options: { cwd: neutralCwd(), env } };
}
