// Drives code-server (VS Code in the browser) through Debian's Chromium with
// playwright-core; started by run.sh, which sets the E2E_* variables.
//
// Steps: open buggy_kernel.py; the pallas-lsp status bar item turns to
// "running"; PAL101 shows in the Problems panel; the hover on `sem` says
// "DMA semaphore · shape ()"; the quick fix "Pass the Ref `scratch` instead
// of reading it" is offered and applied; the line reads `scratch` and the
// Problems panel is empty; in tokens_kernel.py the Ref `x_ref`, the Array `y`
// and the semaphore `sems` get different colours from the default theme (our
// semantic tokens); the run command; the output channel; buggy_notebook.ipynb
// in VS Code's notebook editor: PAL101 in the kernel cell (squiggle, Problems
// panel at the cell's own line and column) and the hover on `x_ref` in that
// cell. Selectors are VS Code 1.139 internals.
"use strict";

const path = require("node:path");
const fs = require("node:fs");

const { env, log, openPage, wordCenter } = require("../../tests/editors/e2e_browser.cjs");
const URL = env("E2E_URL");
const OUT = env("E2E_OUT");
const IMG = env("E2E_IMG");

const CODE = "PAL101";
const HOVER = "DMA semaphore · shape ()";
const FIX = "Pass the Ref `scratch` instead of reading it";
const BUGGY = "make_async_copy(scratch[...], o_hbm, sem)";
const FIXED = "make_async_copy(scratch, o_hbm, sem)";
// 1-based line:column of the flagged `scratch[...]` and of `sem` in the fixture
const FLAGGED_AT = "15:35";
const SEM_AT = "15:56";
// tests/editors/fixtures/buggy_notebook.ipynb: PAL101 in the kernel cell,
// launched from the next cell
const NOTEBOOK = "buggy_notebook.ipynb";
const NOTEBOOK_HOVER = "x_ref: Ref · ANY";

async function main() {
  const { browser, page, shot: save } = await openPage({ width: 1200, height: 680 });
  const consoleLines = [];
  page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  let step = "start";
  const shot = (name, dir = OUT) => save(name, dir);

  try {
    step = "load the workbench";
    log(`${step}: ${URL}`);
    await page.goto(URL, { waitUntil: "domcontentloaded", timeout: 120_000 });
    await page.locator(".monaco-workbench").waitFor({ timeout: 120_000 });
    await page.locator(".explorer-folders-view, .explorer-viewlet").first().waitFor({ timeout: 60_000 });
    // let the workbench settle (extensions scanned, restored views)
    await page.waitForTimeout(2000);

    step = "open buggy_kernel.py";
    log(step);
    await openFile(page, "buggy_kernel.py");
    const lineWithBug = page.locator(".monaco-editor .view-line", { hasText: "make_async_copy" });
    await lineWithBug.first().waitFor({ timeout: 30_000 });

    step = "the server starts (status bar)";
    log(step);
    const status = page.locator(".statusbar-item", { hasText: "pallas-lsp" });
    await status.first().waitFor({ timeout: 60_000 });
    await page.waitForFunction(() => {
      const items = [...document.querySelectorAll(".statusbar-item")];
      const item = items.find((el) => el.textContent && el.textContent.includes("pallas-lsp"));
      return item && item.querySelector(".codicon-check");
    }, null, { timeout: 90_000 });

    step = `${CODE} in the Problems panel`;
    log(step);
    await page.keyboard.press("Control+Shift+M");
    const markers = page.locator(".markers-panel");
    await markers.waitFor({ timeout: 30_000 });
    const row = markers.locator(".monaco-list-row", { hasText: CODE });
    await row.first().waitFor({ timeout: 60_000 });
    const rowText = await row.first().innerText();
    log(`problems row: ${rowText.replace(/\s+/g, " ")}`);
    if (!rowText.includes("must be Refs")) throw new Error(`unexpected problem text: ${rowText}`);
    await page.locator(".monaco-editor .squiggly-error").first().waitFor({ timeout: 10_000 });
    await shot("vscode-problems.png", IMG);

    step = "hover on `sem`";
    log(step);
    await goTo(page, SEM_AT);
    await page.waitForTimeout(300);
    // Ctrl+K Ctrl+I: editor.action.showHover at the cursor
    await page.keyboard.press("Control+K");
    await page.keyboard.press("Control+I");
    const hover = page.locator(".monaco-hover:not(.hidden)", { hasText: HOVER });
    await hover.first().waitFor({ timeout: 30_000 });
    log(`hover: ${(await hover.first().innerText()).replace(/\s+/g, " ")}`);
    await shot("vscode-hover.png", IMG);
    await page.keyboard.press("Escape");

    step = "quick fix";
    log(step);
    await goTo(page, FLAGGED_AT);
    await page.waitForTimeout(300);
    await page.keyboard.press("Control+.");
    const item = page.locator(".action-widget .monaco-list-row", { hasText: FIX });
    await item.first().waitFor({ timeout: 30_000 });
    const titles = await page.locator(".action-widget .monaco-list-row").allInnerTexts();
    log(`code actions: ${JSON.stringify(titles.map((t) => t.trim()))}`);
    await shot("vscode-quickfix.png", IMG);
    await item.first().click();

    step = "the fix is applied and the diagnostic goes away";
    log(step);
    await page.locator(".monaco-editor .view-line", { hasText: FIXED }).first().waitFor({ timeout: 30_000 });
    if (await page.locator(".monaco-editor .view-line", { hasText: BUGGY }).count()) {
      throw new Error("the buggy line is still there");
    }
    await page.waitForFunction((code) => {
      const panel = document.querySelector(".markers-panel");
      return panel && !panel.textContent.includes(code);
    }, CODE, { timeout: 60_000 });
    await page.locator(".monaco-editor .squiggly-error").first().waitFor({ state: "detached", timeout: 30_000 });
    await page.waitForTimeout(500);
    await shot("vscode-fixed.png", IMG);

    step = "semantic tokens: a Ref and an Array coloured differently";
    log(step);
    await openFile(page, "tokens_kernel.py");
    await page.locator(".monaco-editor .view-line", { hasText: "y = x_ref[...]" }).first()
      .waitFor({ timeout: 30_000 });
    // The colour of a word on the line that starts with `prefix`, once the
    // theme's colour for it comes from our token (semantic tokens arrive after
    // the TextMate colours).
    const colours = await page.waitForFunction(() => {
      const lines = [...document.querySelectorAll(".monaco-editor .view-line")];
      const text = (el) => el.textContent.replace(/\u00a0/g, " ");  // the editor renders nbsp
      const colourOf = (prefix, word) => {
        const line = lines.find((l) => text(l).trimStart().startsWith(prefix));
        const span = line && [...line.querySelectorAll("span span")].find((s) => text(s).trim() === word);
        return span ? getComputedStyle(span).color : null;
      };
      const ref = colourOf("y = x_ref", "x_ref");
      const array = colourOf("y = x_ref", "y");
      const sem = colourOf("tag = ", "sems");
      const descriptor = colourOf("copy.start()", "copy");
      const plain = colourOf("tag = ", "tag");  // a constant: no token of ours
      return ref && array && sem && plain && ref !== array && ref !== plain && sem !== ref
        && sem !== array ? { ref, array, sem, descriptor, plain } : null;
    }, null, { timeout: 60_000 });
    log(`token colours: ${JSON.stringify(await colours.jsonValue())}`);
    await goTo(page, "9:9");
    await quickInput(page, "F1", ">View: Toggle Panel Visibility");  // more kernel in the picture
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "Toggle Panel Visibility" }).first()
      .waitFor({ timeout: 30_000 });
    await page.keyboard.press("Enter");
    await page.waitForTimeout(800);
    await shot("vscode-semantic-tokens.png", IMG);
    // back to the buggy kernel (its tab): the run below is for it
    await page.locator(".tab", { hasText: "buggy_kernel.py" }).first().click();
    await page.locator(".tab.active", { hasText: "buggy_kernel.py" }).waitFor({ timeout: 30_000 });

    step = "run command (interpret mode)";
    log(step);
    // The server side of runs may not exist yet: then the client says so.
    await quickInput(page, "F1", ">pallas-lsp: Run Kernel in Interpret Mode");
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "Run Kernel in Interpret Mode" })
      .first().waitFor({ timeout: 30_000 });
    await page.keyboard.press("Enter");
    const toast = page.locator(".notifications-toasts .notification-toast",
      { hasText: /cannot run kernels yet|pallas-lsp: running|pallas-lsp run/ });
    await toast.first().waitFor({ timeout: 60_000 });
    log(`run: ${(await toast.first().innerText()).replace(/\s+/g, " ").slice(0, 300)}`);
    await shot("run-command.png");
    await page.keyboard.press("Escape");

    step = "the output channel";
    log(step);
    await status.first().click();
    // the run's log lines follow the start-up lines: go to the top of the channel
    const output = page.locator(".panel .monaco-editor").first();
    await output.waitFor({ timeout: 30_000 });
    await output.click();
    await page.keyboard.press("Control+Home");
    await page.locator(".monaco-editor .view-line", { hasText: "starting pallas-lsp" }).first()
      .waitFor({ timeout: 30_000 });
    if (await page.locator(".monaco-editor .view-line", { hasText: "[error]" }).count()) {
      throw new Error("the output channel shows an error");
    }
    await page.waitForTimeout(1000);
    await shot("output-channel.png");

    step = "a notebook: the diagnostic in its kernel cell";
    log(step);
    // VS Code's built-in ipynb support opens it in the notebook editor (no
    // Jupyter extension, no kernel); the client sends it by notebook sync.
    await openFile(page, NOTEBOOK);
    const kernelCell = page.locator(".notebook-editor .cell-editor-container .monaco-editor",
      { hasText: "def copy_kernel" }).first();
    await kernelCell.waitFor({ timeout: 60_000 });
    await kernelCell.locator(".squiggly-error").first().waitFor({ timeout: 60_000 });
    await page.keyboard.press("Control+Shift+M");
    const cellRow = page.locator(".markers-panel .monaco-list-row", { hasText: CODE });
    await cellRow.first().waitFor({ timeout: 60_000 });
    const cellRowText = (await cellRow.first().innerText()).replace(/\s+/g, " ");
    log(`problems row: ${cellRowText}`);
    // the cell's own position: line 2, column 34 of the kernel cell
    if (!cellRowText.includes("must be Refs") || !cellRowText.includes("[Ln 2, Col 34]")) {
      throw new Error(`unexpected problem text: ${cellRowText}`);
    }
    // the panel covers the kernel cell: scroll the notebook (a virtual list)
    const list = await page.locator(".notebook-editor .monaco-list").first().boundingBox();
    await page.mouse.move(list.x + list.width / 2, list.y + 40);
    await page.mouse.wheel(0, 180);
    await page.waitForTimeout(500);
    await shot("vscode-notebook-diagnostic.png");

    step = "a notebook: hover on the Ref `x_ref` in its kernel cell";
    log(step);
    await quickInput(page, "F1", ">View: Toggle Panel Visibility");  // the whole cell in view
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "Toggle Panel Visibility" }).first()
      .waitFor({ timeout: 30_000 });
    await page.keyboard.press("Enter");
    await page.locator(".markers-panel").waitFor({ state: "hidden", timeout: 10_000 });
    await page.waitForTimeout(300);
    // the parameter `x_ref` on the cell's `def` line
    const at = await kernelCell.evaluate(wordCenter, { lines: ".view-line", start: "def ", word: "x_ref" });
    if (!at) throw new Error("`x_ref` not found on the kernel cell's def line");
    await page.mouse.move(at.x, at.y);
    await page.mouse.move(at.x + 1, at.y);
    const cellHover = page.locator(".monaco-hover:not(.hidden)", { hasText: NOTEBOOK_HOVER });
    await cellHover.first().waitFor({ timeout: 30_000 });
    log(`hover: ${(await cellHover.first().innerText()).replace(/\s+/g, " ")}`);
    await shot("vscode-notebook-hover.png");
    log("PASSED");
  } catch (err) {
    log(`FAILED at step "${step}": ${err && err.stack ? err.stack : err}`);
    await page.screenshot({ path: path.join(OUT, "failure.png") }).catch(() => {});
    fs.writeFileSync(path.join(OUT, "failure.html"), await page.content().catch(() => ""));
    process.exitCode = 1;
  } finally {
    fs.writeFileSync(path.join(OUT, "browser-console.log"), consoleLines.join("\n") + "\n");
    await browser.close();
  }
}

async function quickInput(page, opener, text) {
  await page.keyboard.press(opener);
  const input = page.locator(".quick-input-widget input");
  await input.first().waitFor({ state: "visible", timeout: 30_000 });
  await input.first().fill(text);
  return input.first();
}

async function openFile(page, name) {
  await page.locator(".monaco-workbench").click({ position: { x: 600, y: 300 } }).catch(() => {});
  await quickInput(page, "Control+P", name);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().waitFor({ timeout: 30_000 });
  await page.keyboard.press("Enter");
  await page.locator(".tab.active", { hasText: name }).waitFor({ timeout: 30_000 });
}

async function goTo(page, lineColumn) {
  // Quick Open with ":line:column" goes to that position in the active editor
  // (Ctrl+G is taken by the browser build's keybindings).
  await quickInput(page, "Control+P", `:${lineColumn}`);
  await page.waitForTimeout(200);
  await page.keyboard.press("Enter");
  await page.locator(".quick-input-widget").first().waitFor({ state: "hidden", timeout: 10_000 });
}

main().catch((err) => {
  log(`error: ${err && err.stack ? err.stack : err}`);
  process.exitCode = 1;
});
