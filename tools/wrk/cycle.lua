-- The cycle workload of holdfast bench, one request per operation, for
-- wrk: each connection acquires and releases a key of its own, again and
-- again. Run it with as many threads as connections (-t 64 -c 64), so
-- that each connection has a thread, and so a key, of its own, and its
-- release follows its acquire. Requests/sec ÷ 2 is cycles per second; a
-- refusal or an error shows as "Non-2xx or 3xx responses".
--
--   wrk -t 64 -c 64 -d 10s -s tools/wrk/cycle.lua http://127.0.0.1:7070

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

function init(args)
  local session = "wrk-" .. id
  local key = "wrk/" .. id
  local headers = { ["Content-Type"] = "application/json" }
  acquire = wrk.format("POST", "/v1/locks/acquire", headers,
    '{"keys":["' .. key .. '"],"owner":{"session":"' .. session .. '","user":"' .. session .. '"},"ttl_seconds":60}')
  release = wrk.format("POST", "/v1/locks/release", headers,
    '{"session":"' .. session .. '","keys":["' .. key .. '"]}')
  sent = 0
end

function request()
  sent = sent + 1
  if sent % 2 == 1 then
    return acquire
  end
  return release
end
