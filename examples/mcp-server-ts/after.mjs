// before.mjs with the sampling moved to sampled: the tool no longer asks
// its client to sample, so any MCP client can call it, and sampleSchema
// returns a value that validates against City (sampled retries the model
// with the errors until it does). SAMPLED_URL and SAMPLED_API_KEY say
// where sampled is.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import * as z from "zod";
import { sampled } from "@sampled/client";

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
    const value = (await sampled.sampleSchema(City, request)).parsed;
    return { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value };
  },
);

await server.connect(new StdioServerTransport());
