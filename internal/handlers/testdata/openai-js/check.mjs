// The official openai npm package against sampled's /openai/v1: each case
// prints what the SDK saw, as one JSON object on stdout, for
// internal/handlers/openai_node_test.go to check.
//
// Usage: BASE_URL=http://127.0.0.1:PORT/openai/v1 API_KEY=key node check.mjs
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
const person = {
  type: 'object',
  properties: { name: { type: 'string' } },
  required: ['name'],
  additionalProperties: false,
};
const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const user = (text) => [{ role: 'user', content: text }];

// failure is what the SDK raised, in the members the checks read.
function failure(err) {
  if (!(err instanceof OpenAI.APIError)) throw err;
  return { status: err.status, type: err.type, code: err.code, param: err.param, message: err.message, name: err.constructor.name };
}

async function streamed(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let content = '';
  let chunks = 0;
  let finish = null;
  let usage = null;
  const calls = {};
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? '';
      for (const tc of choice.delta.tool_calls ?? []) {
        calls[tc.index] ??= { id: '', name: '', arguments: '' };
        calls[tc.index].id ||= tc.id ?? '';
        calls[tc.index].name ||= tc.function?.name ?? '';
        calls[tc.index].arguments += tc.function?.arguments ?? '';
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { content, chunks, finish, usage, toolCalls: Object.values(calls) };
}

const out = {};

const chat = await client.chat.completions.create({ model: 'offline/default', messages: user('Say hello to the SDK') });
out.chat = { object: chat.object, content: chat.choices[0].message.content, finish: chat.choices[0].finish_reason, usage: chat.usage };

out.stream = await streamed({ model: 'offline/default', messages: user('Say hello to the SDK') });

const tools = await client.chat.completions.create({
  model: 'offline/default', messages: user('What is the weather in Paris?'), tools: [weather], tool_choice: 'required',
});
out.tools = { finish: tools.choices[0].finish_reason, toolCalls: tools.choices[0].message.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) };
out.toolsStream = await streamed({
  model: 'offline/default', messages: user('What is the weather in Paris?'), tools: [weather],
  tool_choice: { type: 'function', function: { name: 'get_weather' } },
});

const format = { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } };
const { data: schema, response } = await client.chat.completions
  .create({ model: 'offline/flaky', messages: user('A person'), response_format: format })
  .withResponse();
out.schema = { content: schema.choices[0].message.content, attempts: response.headers.get('sampled-attempts'), usage: schema.usage };
out.schemaStream = await streamed({ model: 'offline/flaky', messages: user('A person'), response_format: format });

try {
  await client.chat.completions.create({ model: 'offline/broken', messages: user('A person'), response_format: format, sampled: { retries: 0 } });
  out.exhausted = 'no error';
} catch (err) {
  out.exhausted = failure(err);
}
try {
  await client.chat.completions.create({ model: 'offline/default', messages: user('hi'), logprobs: true });
  out.unknownMember = 'no error';
} catch (err) {
  out.unknownMember = failure(err);
}
try {
  await client.chat.completions.create({ model: 'nowhere/none', messages: user('hi') });
  out.unknownModel = 'no error';
} catch (err) {
  out.unknownModel = failure(err);
}
try {
  await new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'not-a-key', maxRetries: 0 }).models.list();
  out.badKey = 'no error';
} catch (err) {
  out.badKey = failure(err);
}

out.models = [];
for await (const m of client.models.list()) out.models.push({ id: m.id, object: m.object, owned_by: m.owned_by });

console.log(JSON.stringify(out));
