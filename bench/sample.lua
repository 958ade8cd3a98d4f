-- wrk script: POST a plain sampling request to /v1/sample.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"prompt":"Name three rivers in France"}'
