-- wrk script: POSTs the body file with the token; VARY=vary makes every body distinct (a new
-- first line), so that no two stored logs are the same.
local f = assert(io.open(os.getenv("FAULTLINE_BENCH_BODY"), "rb"))
local body = f:read("*a")
f:close()
local vary = os.getenv("VARY") == "vary"
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "text/plain"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("FAULTLINE_BENCH_TOKEN")
request = function()
  if vary then
    n = n + 1
    return wrk.format(nil, nil, nil, "step " .. n .. " " .. math.random(1, 1e9) .. "\n" .. body)
  end
  return wrk.format(nil, nil, nil, body)
end
