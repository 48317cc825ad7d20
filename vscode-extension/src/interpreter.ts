// Which Python starts the server, and whether pallas-lsp is installed in it.
//
// Order: the `pallas-lsp.interpreter` setting, else the interpreter selected
// in the Python extension (ms-python.python, `environments` API) when that
// extension is installed, else `python3` from PATH.
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";
import { SECTION } from "./settings";

export const PYTHON_EXTENSION_ID = "ms-python.python";
export const DEFAULT_PYTHON = process.platform === "win32" ? "python" : "python3";

export type InterpreterSource = "setting" | "python-extension" | "default";

export interface Interpreter {
  /** What is executed: an absolute path, or a bare name looked up on PATH. */
  command: string;
  source: InterpreterSource;
  /** Lines for the output channel explaining the choice. */
  notes: string[];
}

// The part of the Python extension's API that is used here (see
// @vscode/python-extension: PythonExtension.environments).
interface EnvironmentPath {
  readonly id: string;
  readonly path: string;
}
interface ResolvedEnvironment {
  readonly executable: { readonly uri: vscode.Uri | undefined };
}
interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: vscode.Uri | vscode.WorkspaceFolder): EnvironmentPath;
  resolveEnvironment(env: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
  readonly onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
}
interface PythonExtensionApi {
  readonly environments?: PythonEnvironmentsApi;
}

export async function pythonEnvironments(): Promise<PythonEnvironmentsApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (!ext) {
    return undefined;
  }
  try {
    const api = ext.isActive ? ext.exports : await ext.activate();
    return api?.environments;
  } catch {
    return undefined;
  }
}

function expand(value: string, folder: vscode.WorkspaceFolder | undefined): string {
  let out = value.trim();
  out = out.replace(/\$\{userHome\}/g, os.homedir());
  if (folder) {
    out = out.replace(/\$\{workspaceFolder\}/g, folder.uri.fsPath);
  }
  if (out === "~" || out.startsWith("~/")) {
    out = path.join(os.homedir(), out.slice(1));
  }
  const bareName = !out.includes("/") && !out.includes("\\");
  if (!bareName && !path.isAbsolute(out) && folder) {
    out = path.resolve(folder.uri.fsPath, out);
  }
  return out;
}

/** True when `file` lies inside one of the open workspace folders. */
export function insideWorkspace(file: string): boolean {
  const resolved = path.resolve(file);
  return (vscode.workspace.workspaceFolders ?? []).some((folder) => {
    const rel = path.relative(folder.uri.fsPath, resolved);
    return rel !== "" && !rel.startsWith("..") && !path.isAbsolute(rel);
  });
}

export async function resolveInterpreter(resource?: vscode.Uri): Promise<Interpreter> {
  const notes: string[] = [];
  const folder = resource
    ? vscode.workspace.getWorkspaceFolder(resource)
    : vscode.workspace.workspaceFolders?.[0];
  // In an untrusted workspace VS Code returns only the user's value of this
  // (restricted) setting.
  const configured = vscode.workspace.getConfiguration(SECTION, resource).get<string>("interpreter", "");
  if (configured && configured.trim()) {
    const command = expand(configured, folder);
    notes.push(`interpreter from the setting ${SECTION}.interpreter: ${command}`);
    return { command, source: "setting", notes };
  }
  const envs = await pythonEnvironments();
  if (envs) {
    try {
      const active = envs.getActiveEnvironmentPath(folder ?? resource);
      const resolved = await envs.resolveEnvironment(active);
      const executable = resolved?.executable.uri?.fsPath ?? active.path;
      if (executable) {
        if (!vscode.workspace.isTrusted && insideWorkspace(executable)) {
          notes.push(`not using the Python extension's interpreter ${executable}: it is inside ` +
            "this untrusted workspace");
        } else {
          notes.push(`interpreter selected in the Python extension: ${executable}`);
          return { command: executable, source: "python-extension", notes };
        }
      }
    } catch (err) {
      notes.push(`the Python extension did not give an interpreter: ${String(err)}`);
    }
  } else {
    notes.push("the Python extension (ms-python.python) is not installed");
  }
  notes.push(`using ${DEFAULT_PYTHON} from PATH`);
  return { command: DEFAULT_PYTHON, source: "default", notes };
}

/** A shell-safe rendering of `argv` for messages and terminals. */
export function shellCommand(argv: string[]): string {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(" ");
}

export function installCommand(python: string): string {
  return shellCommand([python, "-m", "pip", "install", "pallas-lsp"]);
}
