-- Headless Neovim 0.11+: semantic tokens from the real pallas-lsp server arrive
-- and carry the highlight groups docs/editors/neovim.md documents.
--
--   PALLAS_FILE=editor_kernel.py PALLAS_PYTHON=python nvim --headless --clean -n \
--     -c 'luafile tests/editors/nvim_tokens.lua'
--
-- Writes one line "PALLAS_RESULT <json>" to stdout; a watchdog quits after
-- PALLAS_TIMEOUT_MS.

local result = { ok = false, tokens = {} }

local function finish(code)
  io.stdout:write("PALLAS_RESULT " .. vim.fn.json_encode(result) .. "\n")
  io.stdout:flush()
  vim.cmd((code == 0) and "qall!" or ("cquit! " .. code))
end

local timeout_ms = tonumber(os.getenv("PALLAS_TIMEOUT_MS") or "60000")
vim.defer_fn(function()
  result.error = "watchdog: no result after " .. timeout_ms .. " ms"
  finish(3)
end, timeout_ms)

local function wait(ms, predicate, what)
  if not vim.wait(ms, predicate, 20) then
    error("timed out waiting for " .. what, 0)
  end
end

-- the tokens of our client that cover (row, byte col), with their groups
local function tokens_at(bufnr, client_id, row, col)
  local out = {}
  for _, tok in ipairs(vim.lsp.semantic_tokens.get_at_pos(bufnr, row, col) or {}) do
    if tok.client_id == client_id then
      local mods = {}
      for m, on in pairs(tok.modifiers or {}) do
        if on then table.insert(mods, m) end
      end
      table.sort(mods)
      local groups = { "@lsp.type." .. tok.type }
      for _, m in ipairs(mods) do
        table.insert(groups, "@lsp.mod." .. m)
        table.insert(groups, "@lsp.typemod." .. tok.type .. "." .. m)
      end
      table.insert(out, { type = tok.type, modifiers = mods, groups = groups,
                          start_col = tok.start_col, end_col = tok.end_col })
    end
  end
  return out
end

local function main()
  local file = assert(os.getenv("PALLAS_FILE"), "PALLAS_FILE is not set")
  local python = assert(os.getenv("PALLAS_PYTHON"), "PALLAS_PYTHON is not set")
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start({
    name = "pallas-lsp",
    cmd = { python, "-P", "-m", "pallas_lsp", "serve" },
    root_dir = vim.fn.fnamemodify(file, ":p:h"),
  })
  assert(client_id, "vim.lsp.start failed")
  local client = vim.lsp.get_client_by_id(client_id)
  wait(20000, function() return client.initialized end, "initialize")
  result.encoding = client.offset_encoding
  result.legend = client.server_capabilities.semanticTokensProvider.legend

  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local function where(needle)
    for row, text in ipairs(lines) do
      local col = text:find(needle, 1, true)
      if col then return row - 1, col - 1 end
    end
    error("not in the file: " .. needle, 0)
  end
  local probes = {
    x_ref = { where("x_ref, o_ref") },
    y = { where("y = x_ref") },
    copy = { where("copy = pltpu") },          -- after an emoji: byte columns
    sems_at = { where("sems.at[0])") },
    o_hbm_at = { where("o_hbm.at[0]") },
    tag = { where("tag = ") },                 -- a constant: no token of ours
  }
  local row, col = unpack(probes.x_ref)
  wait(30000, function() return #tokens_at(bufnr, client_id, row, col) > 0 end,
       "semantic tokens from pallas-lsp")
  for name, pos in pairs(probes) do
    result.tokens[name] = { col = pos[2], found = tokens_at(bufnr, client_id, pos[1], pos[2]) }
  end
  vim.lsp.stop_client(client_id)
  result.ok = true
end

local ok, err = pcall(main)
if not ok then
  result.error = tostring(err)
  finish(1)
else
  finish(0)
end
