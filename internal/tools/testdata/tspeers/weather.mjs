// An MCP server on the official TypeScript SDK whose tool runs its own agent
// loop through its client's sampling (SEP-1577): the model sees the
// server's tools, answers with tool_use, the server runs the tools and
// sends their results back, over several rounds. The peer of the host
// tests in internal/app.
//
// Usage: node weather.mjs            serve over stdio
//        node weather.mjs --http     serve streamable HTTP on 127.0.0.1 and
//                                    print its URL (http://127.0.0.1:PORT/mcp)
//
// Tool "forecast" {city}: asks the client, with the tools get_weather and
// get_time, "What is the weather in <city>?" and then, in a conversation
// of its own, "What time is it in <city>?", running every tool call the
// model makes. It answers with the
// model's final text of each question and structuredContent {answers,
// toolCalls, samplingRequests, progress}: the tools it ran, the number of
// sampling requests and of progress notifications it received.
//
// Tool "raw_sample" {params}: sends params as they are, unchecked, as a
// sampling/createMessage request, and answers structuredContent {result},
// or {code, message} (isError) with the client's JSON-RPC error: the peer
// of the tests of params that fail to decode.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, CreateMessageResultSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const serverTools = [
  {
    name: 'get_time',
    description: 'Get the current local time of a city.',
    inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
  {
    name: 'get_weather',
    description: 'Get the current weather of a city.',
    inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
];

function runServerTool(call) {
  const city = call.input?.city ?? 'nowhere';
  if (call.name === 'get_weather') return `Sunny, 21 C in ${city}`;
  if (call.name === 'get_time') return `It is 14:05 in ${city}`;
  throw new Error(`unknown tool ${call.name}`);
}

function blocks(content) {
  return Array.isArray(content) ? content : [content];
}

// forecast runs the loop of one question per round of questions.
async function forecast(server, city, extra) {
  let samplingRequests = 0;
  let progress = 0;
  const toolCalls = [];
  const answers = [];
  const options = {
    relatedRequestId: extra.requestId,
    onprogress: () => { progress++; },
    resetTimeoutOnProgress: true,
    timeout: 30000,
  };
  for (const question of [`What is the weather in ${city}?`, `What time is it in ${city}?`]) {
    const messages = [{ role: 'user', content: { type: 'text', text: question } }];
    for (let round = 0; round < 5; round++) {
      const result = await server.createMessage({ messages, maxTokens: 300, tools: serverTools }, options);
      samplingRequests++;
      const content = blocks(result.content);
      messages.push({ role: 'assistant', content });
      const uses = content.filter((c) => c.type === 'tool_use');
      if (result.stopReason !== 'toolUse' || uses.length === 0) {
        answers.push(content.filter((c) => c.type === 'text').map((c) => c.text).join(''));
        break;
      }
      const results = uses.map((u) => {
        toolCalls.push(u.name);
        return { type: 'tool_result', toolUseId: u.id, content: [{ type: 'text', text: runServerTool(u) }] };
      });
      messages.push({ role: 'user', content: results });
    }
  }
  return { answers, toolCalls, samplingRequests, progress };
}

function newServer() {
  const server = new Server({ name: 'ts-weather', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{
      name: 'forecast',
      description: 'Forecast the weather and the time of a city, asking the client to sample.',
      inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    }, {
      name: 'raw_sample',
      description: 'Send params, unchecked, as a sampling request.',
      inputSchema: { type: 'object', properties: { params: {} }, required: ['params'] },
    }],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    if (request.params.name === 'raw_sample') {
      const params = request.params.arguments?.params;
      try {
        const result = await server.request({ method: 'sampling/createMessage', params }, CreateMessageResultSchema,
          { relatedRequestId: extra.requestId, timeout: 30000 });
        return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: { result } };
      } catch (err) {
        const out = { code: err.code ?? 0, message: err.message };
        return { isError: true, content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
      }
    }
    if (request.params.name !== 'forecast') throw new Error(`unknown tool ${request.params.name}`);
    try {
      const out = await forecast(server, request.params.arguments?.city ?? 'Paris', extra);
      return { content: [{ type: 'text', text: out.answers.join('\n') }], structuredContent: out };
    } catch (err) {
      return { isError: true, content: [{ type: 'text', text: `sampling failed: ${err.message}` }] };
    }
  });
  return server;
}

async function serveHTTP() {
  const transports = new Map();
  const http = createServer(async (req, res) => {
    try {
      const sid = req.headers['mcp-session-id'];
      let transport = sid ? transports.get(sid) : undefined;
      if (!transport) {
        if (sid) {
          res.writeHead(404).end();
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => transports.set(id, transport),
        });
        transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); };
        await newServer().connect(transport);
      }
      await transport.handleRequest(req, res);
    } catch (err) {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    }
  });
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`http://127.0.0.1:${http.address().port}/mcp\n`);
}

if (process.argv.includes('--http')) {
  await serveHTTP();
} else {
  await newServer().connect(new StdioServerTransport());
}
