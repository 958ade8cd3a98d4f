#!/usr/bin/env bash
# Sends the hostile schemas of issue 13 (cases 1 and 2) to a running
# sampled and prints each answer's status and time, then the service's
# peak memory. Usage: bench/hostile.sh [base URL] [service PID]
set -euo pipefail
url=${1:-http://127.0.0.1:8080}
pid=${2:-}
repeat() { local s=$1 n=$2 out=""; for ((i = 0; i < n; i++)); do out+=$s; done; printf '%s' "$out"; }
send() {
  local name=$1 schema=$2
  printf '{"prompt":"x","schema":%s}' "$schema" >/tmp/hostile-body.json
  curl -s -o /tmp/hostile-answer.json -w "$name: %{http_code} in %{time_total} s, " \
    "$url/v1/sample" -H 'content-type: application/json' --data-binary @/tmp/hostile-body.json
  head -c 120 /tmp/hostile-answer.json; echo
}
send "properties nested 4000 deep" "$(repeat '{"type":"object","properties":{"a":' 4000){\"type\":\"string\"}$(repeat '}}' 4000)"
send "items nested 9000 deep" "$(repeat '{"type":"array","items":' 9000){}$(repeat '}' 9000)"
send "properties nested 30 deep (within the limits)" "$(repeat '{"type":"object","properties":{"a":' 30){\"type\":\"string\"}$(repeat '}}' 30)"
send "171 bytes, every value gigabytes" '{"type":"array","minItems":10000,"items":{"type":"array","minItems":10000,"items":{"type":"string","minLength":100}}}'
if [ -n "$pid" ]; then grep -E 'VmHWM|VmRSS' "/proc/$pid/status"; fi
