"""A FastMCP server whose tool asks the *client* to sample: ctx.sample,
deprecated with MCP sampling (MCP 2026-07-28, SEP-2577). It works only
with clients that declared the sampling capability, and the tool parses
whatever text the client's model wrote.

Shown for comparison with after.py; it needs FastMCP (pip install fastmcp)
and a sampling client, so the tests do not run it.
"""

from __future__ import annotations

import json

from fastmcp import Context, FastMCP

mcp = FastMCP("city-guide")

SYSTEM = "Answer with one JSON object: city, country, population (an integer) and landmarks (strings)."


@mcp.tool
async def describe_city(city: str, ctx: Context) -> dict:
    """Facts about a city, as structured data."""
    reply = await ctx.sample(f"Describe {city}.", system_prompt=SYSTEM, max_tokens=400)
    return json.loads(reply.text)  # may fail: nothing checks the model's JSON


if __name__ == "__main__":
    mcp.run()
