# Sourced by the end-to-end tests (vscode-extension/e2e/run.sh,
# tests/editors/jupyterlab/run.sh) after they define log() and die() and set
# CACHE and OUT: the parts both need, written once.

# CHROMIUM: $CHROMIUM, else Debian's binary (/usr/bin/chromium is a wrapper
# script; the binary is behind it), else chromium / chromium-browser on PATH.
e2e_find_chromium() {
  CHROMIUM=${CHROMIUM:-}
  if [[ -z $CHROMIUM ]]; then
    local c
    for c in /usr/lib/chromium/chromium "$(command -v chromium || true)" "$(command -v chromium-browser || true)"; do
      [[ -n $c && -x $c ]] && { CHROMIUM=$c; break; }
    done
  fi
  [[ -n $CHROMIUM ]] || die "chromium not found (apt-get install -y chromium)"
}

# PW_DIR: playwright-core $1 from npm, installed once into the shared cache.
e2e_playwright() {
  PW_DIR=$CACHE/playwright-core-$1
  if [[ ! -f $PW_DIR/node_modules/playwright-core/package.json ]]; then
    log "installing playwright-core $1 into $PW_DIR"
    mkdir -p "$PW_DIR"
    echo '{"private": true}' >"$PW_DIR/package.json"
    npm install --prefix "$PW_DIR" --no-save "playwright-core@$1" >"$OUT/install-playwright.log" 2>&1 \
      || die "playwright-core install: see $OUT/install-playwright.log"
  fi
}

# End process group $1 (a server started with setsid leaves children behind
# its leader): TERM, up to 5 s, then KILL.
e2e_stop_group() {
  [[ -n ${1:-} ]] || return 0
  kill -TERM -- "-$1" 2>/dev/null || true
  local _
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$1" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$1" 2>/dev/null || true
}

# Everything the editor, the server and Chromium write goes under $1: they
# write into $HOME and the XDG folders whatever their own options say.
e2e_private_home() {
  export HOME=$1/home TMPDIR=$1/tmp
  export XDG_CONFIG_HOME=$1/xdg/config XDG_DATA_HOME=$1/xdg/data
  export XDG_CACHE_HOME=$1/xdg/cache XDG_STATE_HOME=$1/xdg/state XDG_RUNTIME_DIR=$1/xdg/runtime
  mkdir -p "$HOME" "$TMPDIR" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_CACHE_HOME" "$XDG_STATE_HOME"
  mkdir -m 700 -p "$XDG_RUNTIME_DIR"
}
