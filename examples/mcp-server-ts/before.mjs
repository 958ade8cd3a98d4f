// An MCP server whose tool asks the *client* to sample (MCP sampling,
// deprecated in the 2026-07-28 revision): it works only with a client that
// declared the sampling capability, and the answer's JSON is whatever the
// client's model wrote, so the tool parses and hopes.
//
// after.mjs is this file with the sampling moved to sampled.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import * as z from "zod";

const City = z.object({
  city: z.string(),
  country: z.string(),
  population: z.number().int().min(0),
  landmarks: z.array(z.string()),
});

const server = new McpServer({ name: "city-guide", version: "1.0.0" });

server.registerTool(
  "describe_city",
  {
    description: "Facts about a city, as structured data",
    inputSchema: { city: z.string() },
    outputSchema: City.shape,
  },
  async ({ city }) => {
    const request = {
      systemPrompt: "Answer with one JSON object: city, country, population (an integer) and landmarks (strings).",
      messages: [{ role: "user", content: { type: "text", text: `Describe ${city}.` } }],
      maxTokens: 400,
    };
    const value = City.parse(JSON.parse((await server.server.createMessage(request)).content.text));
    return { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value };
  },
);

await server.connect(new StdioServerTransport());
