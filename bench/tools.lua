-- wrk script: POST a tools-mode sampling request to /v1/sample.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"prompt":"What is the weather in Paris?","tools":[{"name":"get_weather","description":"Get current weather for a city","inputSchema":{"type":"object","properties":{"city":{"type":"string","examples":["Paris"]}},"required":["city"]}}]}'
