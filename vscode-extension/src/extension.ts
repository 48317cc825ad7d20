// pallas-lsp for VS Code: starts `<python> -P -m pallas_lsp serve` and connects
// it with vscode-languageclient; adds the run commands, an output channel and
// a status bar item.
import * as readline from "node:readline";
import type { Readable } from "node:stream";
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  RevealOutputChannelOn,
  type ServerOptions,
  State,
} from "vscode-languageclient/node";
import {
  installCommand,
  type Interpreter,
  pythonEnvironments,
  resolveInterpreter,
  shellCommand,
} from "./interpreter";
import { probe, removeNeutralCwd, serverCommand } from "./launch";
import { SECTION, forServer, serverSettings } from "./settings";

/** The server's workspace/executeCommand that runs a kernel. */
export const SERVER_RUN_COMMAND = "pallas-lsp.run";

export type RunMode = "interpret" | "tpu";

export interface RunArguments {
  uri: string;
  mode: RunMode;
  races: boolean;
  /** Also compile every pallas_call for the `runs.compileGenerations` TPU generations. */
  compile?: boolean;
}

type Status = "starting" | "running" | "stopped" | "error";

class Controller implements vscode.Disposable {
  readonly output: vscode.LogOutputChannel;
  private readonly status: vscode.StatusBarItem;
  private client: LanguageClient | undefined;
  private interpreter: Interpreter | undefined;
  private executable: string | undefined;
  private serverVersion: string | undefined;
  private queue: Promise<void> = Promise.resolve();
  private restartTimer: NodeJS.Timeout | undefined;
  private disposed = false;

  constructor() {
    this.output = vscode.window.createOutputChannel("pallas-lsp", { log: true });
    this.status = vscode.window.createStatusBarItem("pallas-lsp.status", vscode.StatusBarAlignment.Right, 100);
    this.status.name = "pallas-lsp";
    this.status.command = "pallas-lsp.showOutput";
    this.setStatus("stopped", "pallas-lsp is not running");
    this.updateStatusVisibility();
  }

  // ------------------------------------------------------------ lifecycle

  /** Start, stop and restart run one at a time, in the order asked. */
  private enqueue(task: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(task, task).catch((err) => {
      this.output.error(`pallas-lsp: ${String(err)}`);
    });
    return this.queue;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  /** Restarts soon, once, however many events ask for it. */
  restartSoon(reason: string): void {
    if (this.restartTimer) {
      clearTimeout(this.restartTimer);
    }
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.output.info(`restarting the server: ${reason}`);
      void this.restart();
    }, 300);
  }

  get interpreterSource(): Interpreter["source"] | undefined {
    return this.interpreter?.source;
  }

  private async doStart(): Promise<void> {
    if (this.disposed) {
      return;
    }
    this.setStatus("starting", "pallas-lsp is starting");
    const resource = vscode.window.activeTextEditor?.document.uri;
    const interpreter = await resolveInterpreter(resource);
    this.interpreter = interpreter;
    for (const note of interpreter.notes) {
      this.output.info(note);
    }
    const env = { ...process.env };
    // Outside the workspace, with safe-path on (see launch.ts): opening a
    // folder never imports its files.
    const found = await probe(interpreter.command, env);
    if (found.kind === "no-python") {
      this.setStatus("error", `Cannot run the Python interpreter ${interpreter.command}`);
      this.output.error(`cannot run ${interpreter.command}: ${found.detail}`);
      void this.showNoPython(interpreter, found.detail);
      return;
    }
    if (found.kind === "not-installed") {
      this.setStatus("error", `pallas-lsp is not installed in ${found.executable}`);
      this.output.error(`pallas-lsp is not installed in ${found.executable}:\n${found.detail}`);
      void this.showNotInstalled(found.executable);
      return;
    }
    this.executable = found.executable;
    this.serverVersion = found.version;
    const spawn = serverCommand(found.executable, env);
    this.output.info(`starting pallas-lsp ${found.version}: ${shellCommand([spawn.command, ...spawn.args])}`);
    const serverOptions: ServerOptions = spawn;

    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
        // Jupyter notebooks' Python cells: the server advertises notebook
        // sync, so the client sends the notebook and these cells through it.
        { notebook: "jupyter-notebook", language: "python" },
      ],
      diagnosticCollectionName: "pallas-lsp",
      outputChannel: this.output,
      traceOutputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      stdioOptions: {
        stdout: (input, channel) => forwardLines(input, (line) => channel.info(line)),
        stderr: (input, channel) => forwardServerLog(input, channel),
      },
      initializationOptions: () => serverSettings(),
      middleware: {
        workspace: {
          // The server asks for section "pallas-lsp"; keep the client's own
          // keys (interpreter, trace) out of its answer.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) {
              return result;
            }
            return result.map((value, i) =>
              params.items[i]?.section === SECTION ? forServer(value) : value);
          },
        },
      },
    };
    const client = new LanguageClient("pallas-lsp", "pallas-lsp", serverOptions, clientOptions);
    client.onDidChangeState((event) => {
      if (client !== this.client) {
        return;
      }
      if (event.newState === State.Running) {
        this.setStatus("running", this.runningTooltip());
      } else if (event.newState === State.Starting) {
        this.setStatus("starting", "pallas-lsp is starting");
      } else {
        this.setStatus("stopped", "pallas-lsp stopped: see the output for why");
      }
    });
    this.client = client;
    try {
      await client.start();
      this.setStatus("running", this.runningTooltip());
    } catch (err) {
      this.setStatus("error", `pallas-lsp failed to start: ${String(err)}`);
      this.output.error(`the server failed to start: ${String(err)}`);
      void vscode.window.showErrorMessage(`pallas-lsp failed to start: ${String(err)}`, "Show Output")
        .then((choice) => choice && this.output.show(true));
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.dispose(3000);
      } catch (err) {
        this.output.warn(`stopping the server: ${String(err)}`);
      }
    }
    this.setStatus("stopped", "pallas-lsp is not running");
  }

  // ------------------------------------------------------------ messages

  private async showNotInstalled(python: string): Promise<void> {
    const command = installCommand(python);
    const choice = await vscode.window.showErrorMessage(
      `pallas-lsp is not installed in the Python interpreter ${python}. Install it with \`${command}\`, ` +
        `then run "pallas-lsp: Restart Server" (or choose another interpreter in the setting ` +
        `${SECTION}.interpreter or in the Python extension).`,
      "Install in Terminal", "Copy Command", "Open Settings");
    if (choice === "Install in Terminal") {
      const terminal = vscode.window.createTerminal("pallas-lsp install");
      terminal.show();
      terminal.sendText(command);
    } else if (choice === "Copy Command") {
      await vscode.env.clipboard.writeText(command);
    } else if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.interpreter`);
    }
  }

  private async showNoPython(interpreter: Interpreter, detail: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(
      `pallas-lsp cannot run the Python interpreter "${interpreter.command}" (${detail.split("\n")[0]}). ` +
        `Set ${SECTION}.interpreter or select an interpreter in the Python extension, ` +
        `and install pallas-lsp there: \`${installCommand(interpreter.command)}\`.`,
      "Open Settings", "Show Output");
    if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.interpreter`);
    } else if (choice === "Show Output") {
      this.output.show(true);
    }
  }

  // ------------------------------------------------------------ status bar

  private runningTooltip(): string {
    return `pallas-lsp ${this.serverVersion ?? ""} running in ${this.executable ?? "?"}` +
      ` (${this.interpreter?.source ?? "?"}). Click for the output.`;
  }

  private setStatus(status: Status, tooltip: string): void {
    const icon = {
      starting: "$(sync~spin)",
      running: "$(check)",
      stopped: "$(circle-slash)",
      error: "$(error)",
    }[status];
    this.status.text = `${icon} pallas-lsp`;
    this.status.tooltip = tooltip;
    this.status.backgroundColor = status === "error"
      ? new vscode.ThemeColor("statusBarItem.errorBackground")
      : undefined;
  }

  updateStatusVisibility(): void {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId === "python") {
      this.status.show();
    } else {
      this.status.hide();
    }
  }

  // ------------------------------------------------------------ runs

  async run(mode: RunMode, races: boolean, compile = false): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      const choice = await vscode.window.showWarningMessage(
        "pallas-lsp runs execute your code, so they are disabled in an untrusted workspace.",
        "Manage Workspace Trust");
      if (choice) {
        await vscode.commands.executeCommand("workbench.trust.manage");
      }
      return;
    }
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== "python") {
      void vscode.window.showWarningMessage("pallas-lsp: open the Python file with the kernel to run first.");
      return;
    }
    const document = editor.document;
    if (document.isUntitled) {
      void vscode.window.showWarningMessage("pallas-lsp: save the file before running it.");
      return;
    }
    const client = this.client;
    if (!client || client.state !== State.Running) {
      const choice = await vscode.window.showWarningMessage(
        "pallas-lsp: the server is not running.", "Restart Server", "Show Output");
      if (choice === "Restart Server") {
        await this.restart();
      } else if (choice === "Show Output") {
        this.output.show(true);
      }
      return;
    }
    const commands = client.initializeResult?.capabilities.executeCommandProvider?.commands ?? [];
    if (!commands.includes(SERVER_RUN_COMMAND)) {
      void vscode.window.showInformationMessage(
        `pallas-lsp ${this.serverVersion ?? ""} in ${this.executable ?? "this interpreter"} cannot run kernels ` +
          `yet: the server does not offer the "${SERVER_RUN_COMMAND}" command. Update pallas-lsp ` +
          "and restart the server.");
      return;
    }
    if (document.isDirty) {
      await document.save();
    }
    const argument: RunArguments = {
      uri: client.code2ProtocolConverter.asUri(document.uri),
      mode,
      races,
      ...(compile ? { compile: true } : {}),
    };
    const what = compile ? "and compiling for TPU"
      : mode === "tpu" ? "on TPU" : races ? "with race detection" : "in interpret mode";
    this.output.info(`run ${what}: ${JSON.stringify(argument)}`);
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `pallas-lsp: running ${what}`, cancellable: true },
      async (_progress, token) => {
        try {
          const result: unknown = await client.sendRequest(
            ExecuteCommandRequest.type, { command: SERVER_RUN_COMMAND, arguments: [argument] }, token);
          this.output.info(`run result: ${JSON.stringify(result)}`);
          const summary = summaryOf(result);
          if (summary) {
            void vscode.window.showInformationMessage(summary);
          }
        } catch (err) {
          if (token.isCancellationRequested) {
            this.output.info("run cancelled");
            return;
          }
          this.output.error(`run failed: ${String(err)}`);
          void vscode.window.showErrorMessage(`pallas-lsp: the run failed: ${String(err)}`, "Show Output")
            .then((choice) => choice && this.output.show(true));
        }
      });
  }

  dispose(): void {
    this.disposed = true;
    if (this.restartTimer) {
      clearTimeout(this.restartTimer);
    }
    this.status.dispose();
    this.output.dispose();
  }
}

function forwardLines(input: Readable, write: (line: string) => void): void {
  readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 })
    .on("line", write);
}

// The server logs "2026-01-01 12:00:00,000 LEVEL logger: message" to stderr;
// show each line at its own level (the channel adds its own timestamp).
// Lines without a level (tracebacks) keep the level of the line before.
const SERVER_LOG_LINE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;

function forwardServerLog(input: Readable, channel: vscode.LogOutputChannel): void {
  let level = "INFO";
  forwardLines(input, (line) => {
    const m = SERVER_LOG_LINE.exec(line);
    let text = line;
    if (m) {
      level = m[1];
      text = m[2];
    }
    if (level === "DEBUG") {
      channel.debug(text);
    } else if (level === "INFO") {
      channel.info(text);
    } else if (level === "WARNING") {
      channel.warn(text);
    } else {
      channel.error(text);
    }
  });
}

function summaryOf(result: unknown): string | undefined {
  if (typeof result === "string") {
    return result;
  }
  if (result && typeof result === "object" && typeof (result as { summary?: unknown }).summary === "string") {
    return (result as { summary: string }).summary;
  }
  return undefined;
}

let controller: Controller | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const ctl = new Controller();
  controller = ctl;
  context.subscriptions.push(
    ctl,
    vscode.commands.registerCommand("pallas-lsp.runInterpret", () => ctl.run("interpret", false)),
    vscode.commands.registerCommand("pallas-lsp.runTpu", () => ctl.run("tpu", false)),
    vscode.commands.registerCommand("pallas-lsp.runRaces", () => ctl.run("interpret", true)),
    vscode.commands.registerCommand("pallas-lsp.compileForTpu", () => ctl.run("interpret", false, true)),
    vscode.commands.registerCommand("pallas-lsp.restartServer", () => ctl.restart()),
    vscode.commands.registerCommand("pallas-lsp.showOutput", () => ctl.output.show(true)),
    vscode.window.onDidChangeActiveTextEditor(() => ctl.updateStatusVisibility()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.interpreter`)) {
        ctl.restartSoon(`${SECTION}.interpreter changed`);
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => ctl.restartSoon("the workspace is now trusted")),
  );
  void ctl.start();
  // Follow the Python extension's interpreter when that is what runs the server.
  void pythonEnvironments().then((envs) => {
    if (envs && controller === ctl) {
      context.subscriptions.push(envs.onDidChangeActiveEnvironmentPath(() => {
        if (ctl.interpreterSource !== "setting") {
          ctl.restartSoon("the Python extension's interpreter changed");
        }
      }));
    }
  });
}

export async function deactivate(): Promise<void> {
  const ctl = controller;
  controller = undefined;
  if (ctl) {
    await ctl.stop();
  }
  removeNeutralCwd();
}
