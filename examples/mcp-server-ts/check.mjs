// Calls describe_city on the server script named by the first argument
// (before.mjs or after.mjs), started over stdio, from the official
// TypeScript SDK's Client, which declares no sampling capability. Prints
// what came back as one JSON object for example_test.go to check.
//
// Usage: SAMPLED_URL=http://127.0.0.1:PORT node check.mjs after.mjs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const script = process.argv[2];
const transport = new StdioClientTransport({
  command: process.execPath,
  args: [script],
  env: { ...getDefaultEnvironment(), SAMPLED_URL: process.env.SAMPLED_URL ?? "" },
  stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (b) => (stderr += b));

const client = new Client({ name: "check", version: "1.0.0" }, { capabilities: {} });
const out = { script };
try {
  await client.connect(transport);
  out.clientCapabilities = {};
  out.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, outputSchema: t.outputSchema }));
  try {
    // The SDK checks structuredContent against the tool's outputSchema.
    const res = await client.callTool({ name: "describe_city", arguments: { city: "Paris" } }, undefined, { timeout: 20000 });
    out.result = { isError: res.isError ?? false, structuredContent: res.structuredContent, text: res.content?.[0]?.text };
  } catch (err) {
    out.error = String(err?.message ?? err);
  }
} finally {
  await client.close().catch(() => {});
}
out.stderr = stderr.slice(0, 2000);
console.log(JSON.stringify(out));
