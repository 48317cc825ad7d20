// Shared by the end-to-end drivers (vscode-extension/e2e/drive.cjs,
// tests/editors/jupyterlab/drive.cjs): the E2E_* variables, a timed log and
// Debian's Chromium started headless through playwright-core, and where a word
// sits on screen in an editor's line.
"use strict";

const path = require("node:path");
const fs = require("node:fs");

function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

const started = Date.now();
function log(message) {
  const s = ((Date.now() - started) / 1000).toFixed(1).padStart(6);
  process.stderr.write(`[drive ${s}s] ${message}\n`);
}

// A page of the given size in a fresh headless Chromium; `shot(name, dir)`
// saves a screenshot of it and logs its size.
async function openPage(viewport) {
  const { chromium } = require(env("E2E_PLAYWRIGHT"));
  const browser = await chromium.launch({
    executablePath: env("E2E_CHROMIUM"),
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run",
      "--disable-dev-shm-usage",
    ],
  });
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const shot = async (name, dir) => {
    const file = path.join(dir, name);
    await page.screenshot({ path: file });
    log(`screenshot ${file} (${fs.statSync(file).size} bytes)`);
  };
  return { browser, page, shot };
}

// Runs in the page (`locator.evaluate(wordCenter, {...})`): the centre of the
// first `word` on the line of `root` (an editor, a notebook cell) whose text
// starts with `start`; `lines` selects the editor's line elements (`.cm-line`
// in CodeMirror, `.view-line` in Monaco). Null when it is not there.
function wordCenter(root, { lines, start, word }) {
  const line = [...root.querySelectorAll(lines)]
    .find((l) => l.textContent.replace(/\u00a0/g, " ").startsWith(start));
  if (!line) return null;
  const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const at = node.data.indexOf(word);
    if (at >= 0) {
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + word.length);
      const r = range.getBoundingClientRect();
      return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
    }
  }
  return null;
}

module.exports = { env, log, openPage, wordCenter };
