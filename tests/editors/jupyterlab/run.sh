#!/usr/bin/env bash
# End-to-end test of pallas-lsp in a real JupyterLab with jupyterlab-lsp,
# driven through Debian's Chromium with playwright-core.
#
#   tests/editors/jupyterlab/run.sh
#
# Installs what it needs under $PALLAS_LSP_E2E_CACHE (default
# ~/.cache/pallas-lsp-e2e, shared with vscode-extension/e2e/run.sh):
# playwright-core from npm and a venv with JupyterLab, jupyterlab-lsp (PyPI)
# and this checkout's pallas-lsp, which registers itself with jupyter-lsp
# through its `jupyter_lsp_spec_v1` entry point (nothing is configured here).
# Needs: python3 (with venv), node and npm, Debian's chromium.
#
# Then: starts `jupyter lab` on 127.0.0.1 (a free port, a random token, a
# fresh root dir, HOME, Jupyter config/data/runtime and settings dirs), and
# runs drive.cjs: open tests/editors/fixtures/buggy_notebook.ipynb, the kernel
# cell is underlined where PAL101 is, the diagnostics panel lists PAL101, the
# hover on the Ref `x_ref` shows the engine's text; the language server
# jupyter-lsp started is `$VENV/bin/python -P -m pallas_lsp serve`. Screenshots and logs:
# $PALLAS_LSP_E2E_OUT (default tests/editors/jupyterlab/out/). Exit status 0
# when every step passed.
set -euo pipefail

# Pinned: the page's selectors are JupyterLab / jupyterlab-lsp internals.
JUPYTERLAB_VERSION=4.6.6
JUPYTERLAB_LSP_VERSION=5.3.0
PLAYWRIGHT_VERSION=1.65.1

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CACHE=${PALLAS_LSP_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pallas-lsp-e2e}
OUT=${PALLAS_LSP_E2E_OUT:-$HERE/out}
NOTEBOOK=$REPO/tests/editors/fixtures/buggy_notebook.ipynb

log() { printf '[jupyterlab-e2e %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

. "$REPO/tests/editors/e2e_common.sh"
e2e_find_chromium
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"
command -v python3 >/dev/null || die "python3 not found"

mkdir -p "$CACHE" "$OUT"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

# ------------------------------------------------------------------ installs

e2e_playwright "$PLAYWRIGHT_VERSION"

# One venv per checkout and JupyterLab version, with this checkout's
# pallas-lsp installed editable (its entry points are read from there).
REPO_KEY=$(printf '%s' "$REPO" | sha1sum | cut -c1-12)
VENV=$CACHE/jupyterlab-$JUPYTERLAB_VERSION-lsp-$JUPYTERLAB_LSP_VERSION-$REPO_KEY
if ! "$VENV/bin/python" -c "
import sys, importlib.metadata as md, pallas_lsp
sys.exit(not pallas_lsp.__file__.startswith('$REPO/')
         or not any(e.name == 'pallas-lsp' for e in md.entry_points(group='jupyter_lsp_spec_v1')))" 2>/dev/null; then
  log "creating $VENV: JupyterLab $JUPYTERLAB_VERSION, jupyterlab-lsp $JUPYTERLAB_LSP_VERSION, pallas-lsp from $REPO"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q -e "$REPO" "jupyterlab==$JUPYTERLAB_VERSION" \
    "jupyterlab-lsp==$JUPYTERLAB_LSP_VERSION" >"$OUT/install-venv.log" 2>&1 \
    || die "pip install: see $OUT/install-venv.log"
fi

# ------------------------------------------------------------------ jupyter lab

RUN=$(mktemp -d "${TMPDIR:-/tmp}/pallas-lsp-jupyterlab-e2e.XXXXXX")
JL_PID=
cleanup() {
  # the server's kernels and language servers are in its process group
  e2e_stop_group "$JL_PID"
  if [[ -z ${PALLAS_LSP_E2E_KEEP:-} ]]; then rm -rf "$RUN"; else log "kept $RUN"; fi
}
trap cleanup EXIT

# Everything Jupyter, the kernel, the language server and Chromium write goes
# under $RUN; no user configuration is read.
e2e_private_home "$RUN"
export JUPYTER_CONFIG_DIR=$RUN/jupyter/config JUPYTER_DATA_DIR=$RUN/jupyter/data
export JUPYTER_RUNTIME_DIR=$RUN/jupyter/runtime IPYTHONDIR=$RUN/ipython
export JUPYTERLAB_SETTINGS_DIR=$RUN/lab/settings JUPYTERLAB_WORKSPACES_DIR=$RUN/lab/workspaces
export JUPYTER_PLATFORM_DIRS=1
ROOT=$RUN/notebooks
mkdir -p "$JUPYTER_CONFIG_DIR" "$JUPYTER_DATA_DIR" "$JUPYTER_RUNTIME_DIR" "$IPYTHONDIR" "$ROOT" \
  "$JUPYTERLAB_WORKSPACES_DIR" "$JUPYTERLAB_SETTINGS_DIR/@jupyterlab/apputils-extension"
cp "$NOTEBOOK" "$ROOT/buggy_notebook.ipynb"
# no news or update toasts over the notebook
echo '{"fetchNews": "false", "checkForUpdates": false}' \
  >"$JUPYTERLAB_SETTINGS_DIR/@jupyterlab/apputils-extension/notification.jupyterlab-settings"

TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log "starting JupyterLab $JUPYTERLAB_VERSION on 127.0.0.1:$PORT (root $ROOT)"
root=()
[[ $(id -u) -ne 0 ]] || root=(--allow-root)  # CI runs as root
t0=$SECONDS
setsid "$VENV/bin/jupyter" lab --no-browser --ip=127.0.0.1 --port="$PORT" --ServerApp.port_retries=0 \
  --IdentityProvider.token="$TOKEN" --ServerApp.root_dir="$ROOT" --ServerApp.terminals_enabled=False \
  --expose-app-in-browser "${root[@]}" \
  >"$OUT/jupyterlab.log" 2>&1 </dev/null &
JL_PID=$!
for _ in $(seq 1 120); do
  if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/api/status?token=$TOKEN', timeout=2)" 2>/dev/null; then
    break
  fi
  kill -0 "$JL_PID" 2>/dev/null || die "jupyter lab exited: see $OUT/jupyterlab.log"
  sleep 0.5
done
log "JupyterLab answered after $((SECONDS - t0)) s"

# jupyter-lsp found the server through the entry point (its status hides argv)
python3 - "$PORT" "$TOKEN" >"$OUT/lsp-status.json" <<'PY' || die "pallas-lsp is not among jupyter-lsp's servers: see $OUT/lsp-status.json"
import json, sys, urllib.request
port, token = sys.argv[1:]
status = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/lsp/status?token={token}", timeout=30))
print(json.dumps(status, indent=1))
assert status["specs"]["pallas-lsp"]["display_name"] == "pallas-lsp"
PY

log "driving JupyterLab with $CHROMIUM"
rc=0
E2E_URL="http://127.0.0.1:$PORT/lab/tree/buggy_notebook.ipynb?token=$TOKEN" E2E_CHROMIUM=$CHROMIUM \
  E2E_OUT=$OUT E2E_PLAYWRIGHT=$PW_DIR/node_modules/playwright-core \
  E2E_JUPYTER_PID=$JL_PID E2E_SERVER_ARGV="$VENV/bin/python -P -m pallas_lsp serve" \
  timeout 300 node "$HERE/drive.cjs" || rc=$?
[[ $rc -eq 0 ]] || die "drive.cjs exited with $rc (screenshots and logs in $OUT)"
log "PASSED in $((SECONDS - t0)) s from JupyterLab's start (screenshots and logs in $OUT)"
