-- wrk script: POSTs the body file with the token; VARY=vary makes every body distinct (a new
-- first line), so that no two stored logs are the same; VARY=corpus posts the logs of
-- FAULTLINE_BENCH_CORPUS (separated by NUL bytes) in turn, each thread from its own start.
local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end
local body = read(os.getenv("FAULTLINE_BENCH_BODY"))
local vary = os.getenv("VARY") == "vary"
local logs = {}
if os.getenv("VARY") == "corpus" then
  for log in read(os.getenv("FAULTLINE_BENCH_CORPUS")):gmatch("([^%z]+)") do
    logs[#logs + 1] = log
  end
end
local n = math.random(0, 1e6)
wrk.method = "POST"
wrk.headers["Content-Type"] = "text/plain"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("FAULTLINE_BENCH_TOKEN")
request = function()
  if #logs > 0 then
    n = n + 1
    return wrk.format(nil, nil, nil, logs[n % #logs + 1])
  end
  if vary then
    n = n + 1
    return wrk.format(nil, nil, nil, "step " .. n .. " " .. math.random(1, 1e9) .. "\n" .. body)
  end
  return wrk.format(nil, nil, nil, body)
end
