-- Headless Neovim against the real pallas-lsp server.
--
--   PALLAS_FILE=kernel.py [PALLAS_DOC=docs/editors/neovim.md PALLAS_SNIPPET=0.11] \
--     nvim --headless --clean -n -c 'luafile tests/editors/nvim_check.lua'
--
-- Without PALLAS_DOC (Neovim 0.7+): starts `pallas-lsp serve` with
-- vim.lsp.start_client and attaches it with vim.lsp.buf_attach_client.
-- With PALLAS_DOC: runs the Lua block marked `<!-- test: nvim-SNIPPET -->` in
-- that file as written, then opens the kernel and waits for the client it
-- starts. (`pallas-lsp` must be on PATH: the tests put a shim there.)
--
-- Then checks the diagnostic, the hover and the quick fix, and writes one line
-- "PALLAS_RESULT <json>" to stdout (print() goes to stderr in headless mode).
-- Lua errors are caught (a top-level error leaves headless nvim waiting
-- forever) and a watchdog quits after PALLAS_TIMEOUT_MS.

local result = { steps = {}, ok = false, messages = {} }

local function step(name, value)
  table.insert(result.steps, name)
  if value ~= nil then
    result[name] = value
  end
end

local function finish(code)
  io.stdout:write("PALLAS_RESULT " .. vim.fn.json_encode(result) .. "\n")
  io.stdout:flush()
  vim.cmd((code == 0) and "qall!" or ("cquit! " .. code))
end

local timeout_ms = tonumber(os.getenv("PALLAS_TIMEOUT_MS") or "60000")
vim.defer_fn(function()
  result.error = "watchdog: no result after " .. timeout_ms .. " ms (last step: "
    .. tostring(result.steps[#result.steps]) .. ")"
  finish(3)
end, timeout_ms)

local function wait(ms, predicate, what)
  if not vim.wait(ms, predicate, 20) then
    error("timed out waiting for " .. what, 0)
  end
end

local function is_stopped(id)
  local client = vim.lsp.get_client_by_id(id)
  return client == nil or client.is_stopped(client)
end

local function clients_of(bufnr)
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  return get({ bufnr = bufnr })
end

-- the request helper both 0.7 and 0.11 have without deprecation warnings
local function request(bufnr, client_id, method, params)
  local responses = vim.lsp.buf_request_sync(bufnr, method, params, 20000)
  local response = responses and responses[client_id]
  if not response or response.err or response.result == nil then
    error(method .. " failed: " .. vim.inspect(response), 0)
  end
  return response.result
end

local function doc_snippet(path, name)
  local text = table.concat(vim.fn.readfile(path), "\n")
  local escaped = name:gsub("[%-%.]", "%%%0")
  local marker = "<!%-%- test: " .. escaped .. " %-%->%s*```lua\n(.-)\n```"
  local code = text:match(marker)
  assert(code, "no block marked `<!-- test: " .. name .. " -->` in " .. path)
  return code
end

local function main()
  local file = assert(os.getenv("PALLAS_FILE"), "PALLAS_FILE is not set")
  local doc = os.getenv("PALLAS_DOC")
  local v = vim.version()
  result.nvim = v.major .. "." .. v.minor .. "." .. v.patch

  -- every window/showMessage (the server warns about invalid settings there)
  vim.lsp.handlers["window/showMessage"] = function(_, params)
    table.insert(result.messages, params and params.message or "?")
    return vim.NIL
  end

  local client_id, bufnr
  if doc then
    local snippet = os.getenv("PALLAS_SNIPPET") or "0.11"
    result.mode = "doc:nvim-" .. snippet
    local chunk = assert(loadstring(doc_snippet(doc, "nvim-" .. snippet), "neovim.md"))
    chunk()
    step("configured")
    vim.cmd("edit " .. vim.fn.fnameescape(file))
    bufnr = vim.api.nvim_get_current_buf()
    wait(20000, function() return #clients_of(bufnr) > 0 end, "the documented config to attach a client")
    client_id = clients_of(bufnr)[1].id
  else
    result.mode = "start_client"
    local python = assert(os.getenv("PALLAS_PYTHON"), "PALLAS_PYTHON is not set")
    vim.cmd("edit " .. vim.fn.fnameescape(file))
    bufnr = vim.api.nvim_get_current_buf()
    client_id = vim.lsp.start_client({
      name = "pallas-lsp",
      cmd = { python, "-m", "pallas_lsp", "serve" },
      root_dir = vim.fn.fnamemodify(file, ":p:h"),
      -- answered to the server's workspace/configuration request
      settings = { ["pallas-lsp"] = { diagnostics = { debounceMs = 20 } } },
      init_options = { inlayHints = { parameters = true } },
    })
    assert(client_id, "vim.lsp.start_client failed")
    assert(vim.lsp.buf_attach_client(bufnr, client_id), "vim.lsp.buf_attach_client failed")
  end
  step("started")
  local client = vim.lsp.get_client_by_id(client_id)
  result.client = client.name
  wait(20000, function() return client.initialized or is_stopped(client_id) end, "initialize")
  assert(not is_stopped(client_id), "the server exited during initialize")
  step("initialized")
  local uri = vim.uri_from_bufnr(bufnr)

  -- 1. the diagnostic
  wait(30000, function() return #vim.diagnostic.get(bufnr) > 0 end, "diagnostics")
  local diag = vim.diagnostic.get(bufnr)[1]
  local lsp_data = (diag.user_data and diag.user_data.lsp) or {}
  step("diagnostic", {
    code = diag.code or lsp_data.code,
    source = diag.source,
    lnum = diag.lnum, col = diag.col, end_lnum = diag.end_lnum, end_col = diag.end_col,
    message = diag.message,
    text = vim.api.nvim_buf_get_text(bufnr, diag.lnum, diag.col, diag.end_lnum, diag.end_col, {})[1],
  })

  -- 2. hover on `sem` in the make_async_copy line
  local line = vim.api.nvim_buf_get_lines(bufnr, diag.lnum, diag.lnum + 1, false)[1]
  local sem_col = assert(line:find("sem%)"), "no `sem)` on the diagnostic's line") - 1
  local hover = request(bufnr, client_id, "textDocument/hover", {
    textDocument = { uri = uri },
    position = { line = diag.lnum, character = sem_col },
  })
  local contents = hover.contents
  step("hover", type(contents) == "table" and (contents.value or vim.inspect(contents)) or contents)

  -- 3. the quick fix
  local range = {
    start = { line = diag.lnum, character = diag.col },
    ["end"] = { line = diag.end_lnum, character = diag.end_col },
  }
  local actions = request(bufnr, client_id, "textDocument/codeAction", {
    textDocument = { uri = uri },
    range = range,
    context = { diagnostics = { {
      range = range, message = diag.message, severity = diag.severity,
      code = diag.code or lsp_data.code, source = diag.source,
    } } },
  })
  local titles, chosen = {}, nil
  for _, action in ipairs(actions) do
    table.insert(titles, action.title)
    if action.kind == "quickfix" and action.isPreferred and action.edit then
      chosen = chosen or action
    end
  end
  step("actions", titles)
  assert(chosen, "no preferred quick fix with an edit")
  vim.lsp.util.apply_workspace_edit(chosen.edit, client.offset_encoding or "utf-16")
  step("applied", chosen.title)
  result.fixed_line = vim.api.nvim_buf_get_lines(bufnr, diag.lnum, diag.lnum + 1, false)[1]

  -- 4. the diagnostic goes away (the edit is sent as didChange)
  wait(30000, function() return #vim.diagnostic.get(bufnr) == 0 end, "the diagnostic to go away")
  step("cleared")

  vim.lsp.stop_client(client_id)
  wait(10000, function() return is_stopped(client_id) end, "the server to stop")
  step("stopped")
  result.ok = true
end

local ok, err = pcall(main)
if not ok then
  result.error = tostring(err)
  finish(1)
else
  finish(0)
end
