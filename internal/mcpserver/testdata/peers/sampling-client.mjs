// A TypeScript-SDK MCP client that declares sampling with tools and answers
// sampled's sampling/createMessage requests, for internal/mcpserver's tests.
// Usage: node sampling-client.mjs <url of /mcp>. It calls agent_classify
// (its first answer is invalid, so sampled must correct it) and
// agent_delegate (the client "runs the loop"), and prints one JSON object:
// {classify, delegate, requests} with the tool results and the sampling
// requests it received.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[2];
const client = new Client({ name: 'ts-sampling-client', version: '1.0.0' }, { capabilities: { sampling: { tools: {} } } });
const requests = [];
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  requests.push(request.params);
  const meta = request.params._meta ?? {};
  let text;
  if ('allowedToolPatterns' in meta) {
    text = `ran the loop over ${meta.allowedToolPatterns.join(',')} in at most ${meta.maxIterations} iterations`;
  } else if (requests.length === 1) {
    text = '{"labels":["weather"],"scores":{}}'; // not a category, scores missing
  } else {
    text = '{"labels":["billing"],"scores":{"billing":0.9,"support":0.1}}';
  }
  return { model: 'ts-client-model', role: 'assistant', stopReason: 'endTurn', content: { type: 'text', text } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const classify = await client.callTool({ name: 'agent_classify', arguments: { text: 'My invoice is wrong.', categories: ['billing', 'support'] } });
const delegate = await client.callTool({ name: 'agent_delegate', arguments: { goal: 'Tidy up', allowedTools: ['std__*'], maxIterations: 2 } });
console.log(JSON.stringify({ classify, delegate, requests }));
await client.close();
