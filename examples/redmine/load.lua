-- load.lua: wrk's script for examples/redmine: a mix of the pages Redmine's users open, as
-- the data instance.rb made them (12 projects of 100 issues each; tracer-p04, p08 and p12 are
-- private). A request in four carries the session cookie of a logged-in user (REDMINE_COOKIE,
-- set by load: it logs in first) and asks for what only a member sees: their page, their
-- issues, the private projects. Every response that is not 200 is counted, and done() prints
-- how many there were, by status (per wrk thread).
local cookie = os.getenv("REDMINE_COOKIE")

local public, private = {}, {}
for p = 1, 12 do
  local id = string.format("tracer-p%02d", p)
  if p % 4 == 0 then table.insert(private, { id = id, n = p }) else table.insert(public, { id = id, n = p }) end
end

-- weight, function(project) -> path
local anonymous = {
  { 1, function(p) return "/" end },
  { 1, function(p) return "/projects" end },
  { 2, function(p) return "/projects/" .. p.id end },
  { 3, function(p) return "/projects/" .. p.id .. "/issues" end },
  { 1, function(p) return "/projects/" .. p.id .. "/issues?sort=priority:desc,updated_on:desc&page=2" end },
  { 6, function(p) return "/issues/" .. ((p.n - 1) * 100 + math.random(100)) end },
  { 2, function(p) return "/projects/" .. p.id .. "/wiki" end },
  { 1, function(p) return "/projects/" .. p.id .. "/wiki/index" end },
  { 1, function(p) return "/projects/" .. p.id .. "/activity" end },
  { 1, function(p) return "/projects/" .. p.id .. "/roadmap" end },
  { 1, function(p) return "/projects/" .. p.id .. "/time_entries" end },
  { 1, function(p) return "/projects/" .. p.id .. "/news" end },
  { 1, function(p) return "/issues.json?project_id=" .. p.id .. "&limit=25" end },
  { 1, function(p) return "/issues/" .. ((p.n - 1) * 100 + math.random(100)) .. ".json?include=journals" end },
}
local member = {
  { 2, function(p) return "/my/page" end },
  { 1, function(p) return "/issues?set_filter=1&assigned_to_id=me" end },
  { 2, function(p) return "/projects/" .. p.id .. "/issues" end },
  { 3, function(p) return "/issues/" .. ((p.n - 1) * 100 + math.random(100)) end },
  { 1, function(p) return "/projects/" .. p.id .. "/wiki" end },
}

local function expand(list)
  local out = {}
  for _, e in ipairs(list) do for _ = 1, e[1] do table.insert(out, e[2]) end end
  return out
end
anonymous, member = expand(anonymous), expand(member)

counter, failed, statuses = 0, 0, {}

function init(args)
  math.randomseed(seed or 23)
end

function request()
  counter = counter + 1
  local headers = {}
  if cookie and counter % 4 == 0 then
    headers["Cookie"] = cookie
    local p = (counter % 8 == 0) and private[math.random(#private)] or public[math.random(#public)]
    return wrk.format("GET", member[math.random(#member)](p), headers)
  end
  return wrk.format("GET", anonymous[math.random(#anonymous)](public[math.random(#public)]), headers)
end

function response(status, headers, body)
  if status ~= 200 then
    failed = failed + 1
    statuses[status] = (statuses[status] or 0) + 1
    local parts = {}
    for s, c in pairs(statuses) do table.insert(parts, s .. ": " .. c) end
    summary = table.concat(parts, ", ")
  end
end

local threads = {}
function setup(thread)
  thread:set("seed", math.random(1000000))
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  local n, parts = 0, {}
  for _, t in ipairs(threads) do
    n = n + (t:get("failed") or 0)
    if t:get("summary") then table.insert(parts, t:get("summary")) end
  end
  io.write(string.format("not 200: %d%s\n", n, #parts > 0 and (" (" .. table.concat(parts, "; ") .. ")") or ""))
end
