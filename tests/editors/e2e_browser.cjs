// Shared by the end-to-end drivers (vscode-extension/e2e/drive.cjs,
// tests/editors/jupyterlab/drive.cjs): the E2E_* variables, a timed log and
// Debian's Chromium started headless through playwright-core.
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

module.exports = { env, log, openPage };
