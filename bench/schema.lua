-- wrk script: POST a schema-mode sampling request to /v1/sample.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"prompt":"Describe Paris","schema":{"type":"object","properties":{"city":{"type":"string"},"population":{"type":"integer","minimum":0}},"required":["city","population"]}}'
