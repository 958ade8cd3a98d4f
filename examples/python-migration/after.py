"""before.py with the sampling moved to sampled, on the standard library
alone (urllib): the tool calls sampled's POST /v1/sample/schema, which
retries the model with the errors until its answer validates against the
schema, so any MCP client can call the tool and gets a valid value.

  python3 after.py Paris                  # the tool's answer, as JSON
  python3 after.py Paris offline/broken   # a model that never validates: the 422
  python3 after.py --serve                # the FastMCP server, where fastmcp is installed

SAMPLED_URL (default http://127.0.0.1:8080) and SAMPLED_API_KEY say where
sampled is.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

SAMPLED_URL = os.environ.get("SAMPLED_URL", "http://127.0.0.1:8080").rstrip("/")
SAMPLED_API_KEY = os.environ.get("SAMPLED_API_KEY", "")

SYSTEM = "Answer with one JSON object: city, country, population (an integer) and landmarks (strings)."

CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "country": {"type": "string"},
        "population": {"type": "integer", "minimum": 0},
        "landmarks": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city", "country", "population", "landmarks"],
    "additionalProperties": False,
}


class SampledError(Exception):
    """A problem document sampled answered with (RFC 9457)."""

    def __init__(self, problem: dict, retry_after: str | None = None):
        super().__init__(problem.get("detail") or problem.get("title"))
        self.problem = problem
        self.status = problem.get("status")
        self.errors = problem.get("errors", [])  # [{"path": "/…", "message": …}]
        self.retry_after = int(retry_after) if retry_after and retry_after.isdigit() else None


class SampleValidationError(SampledError):
    """422: no valid answer within the allowed attempts."""

    def __init__(self, problem: dict, retry_after: str | None = None):
        super().__init__(problem, retry_after)
        self.attempts = problem.get("attempts")
        self.last_result = problem.get("lastResult")


def sample_schema(schema: dict, prompt: str, timeout: float = 120, **options) -> dict:
    """POST /v1/sample/schema: the result, whose "parsed" validates against schema.

    options are members of the request body: systemPrompt, maxTokens, model,
    retries, temperature, messages (in place of prompt)…
    """
    body = json.dumps({"prompt": prompt, "schema": schema, **options}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if SAMPLED_API_KEY:
        headers["Authorization"] = f"Bearer {SAMPLED_API_KEY}"
    request = urllib.request.Request(f"{SAMPLED_URL}/v1/sample/schema", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as err:
        try:
            problem = json.load(err)
        except ValueError:
            problem = {"status": err.code, "title": err.reason}
        cls = SampleValidationError if err.code == 422 else SampledError
        raise cls(problem, err.headers.get("Retry-After")) from None


def describe_city(city: str, model: str | None = None) -> dict:
    """Facts about a city, as structured data."""
    options = {"systemPrompt": SYSTEM, "maxTokens": 400}
    if model:
        options["model"] = model
    return sample_schema(CITY, f"Describe {city}.", **options)["parsed"]


def serve() -> None:
    # The FastMCP server of before.py, its tool now on sampled: no Context,
    # no ctx.sample. (FastMCP runs a sync tool in a worker thread.)
    from fastmcp import FastMCP

    mcp = FastMCP("city-guide")
    mcp.tool(describe_city)
    mcp.run()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        serve()
        return 0
    city = argv[0] if argv else "Paris"
    model = argv[1] if len(argv) > 1 else None
    try:
        print(json.dumps(describe_city(city, model)))
    except SampleValidationError as err:
        print(json.dumps({"error": "SampleValidationError", "status": err.status, "attempts": err.attempts,
                          "errors": err.errors, "lastText": (err.last_result or {}).get("text")}))
        return 3
    except SampledError as err:
        print(json.dumps({"error": "SampledError", "status": err.status, "errors": err.errors}))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
