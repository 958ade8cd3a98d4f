// "Copy as": the playground's request as a curl command, a Go program
// using sampled's client package, or a call of OpenAI's Python SDK
// against sampled's OpenAI dialect (/openai/v1).

function shellQuote(s) {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

// curl is the request as a curl command line.
export function curl(origin, path, body, { stream, key }) {
  const lines = [`curl -s${stream ? 'N' : ''} ${origin}${path} \\`, "  -H 'content-type: application/json' \\"];
  if (stream) lines.push("  -H 'accept: text/event-stream' \\");
  if (key) lines.push('  -H "authorization: Bearer $SAMPLED_API_KEY" \\');
  lines.push(`  -d ${shellQuote(JSON.stringify(body, null, 2))}`);
  return lines.join('\n');
}

const routes = {
  '/v1/sample': 'client.RouteSample',
  '/v1/sample/schema': 'client.RouteSampleSchema',
  '/v1/sample/tools': 'client.RouteSampleTools',
};

function goString(s) {
  return s.includes('`') ? JSON.stringify(s) : `\`${s}\``;
}

// goProgram is a Go program that streams the same request with the
// client package.
export function goProgram(origin, path, body, { key }) {
  const opts = key ? ', client.WithAPIKey(os.Getenv("SAMPLED_API_KEY"))' : '';
  const imports = ['"context"', '"encoding/json"', '"fmt"', '"log"'];
  if (key) imports.push('"os"');
  return `package main

import (
${imports.map((i) => `\t${i}`).join('\n')}

\t"github.com/sampled/sampled/client"
)

func main() {
\tvar req client.SampleRequest
\tif err := json.Unmarshal([]byte(${goString(JSON.stringify(body, null, 2))}), &req); err != nil {
\t\tlog.Fatal(err)
\t}
\tc, err := client.New(${JSON.stringify(origin)}${opts})
\tif err != nil {
\t\tlog.Fatal(err)
\t}
\tfor ev, err := range c.SampleStream(context.Background(), ${routes[path]}, &req) {
\t\tif err != nil {
\t\t\tlog.Fatal(err) // a *client.Problem, or a *client.ValidationError
\t\t}
\t\tswitch {
\t\tcase ev.Delta != nil:
\t\t\tfmt.Print(ev.Delta.Text)
\t\tcase ev.Retry != nil:
\t\t\tfmt.Printf("\\nattempt %d after %v\\n", ev.Retry.Attempt, ev.Retry.Errors)
\t\tcase ev.Result != nil:
\t\t\tfmt.Printf("\\n%d attempt(s), parsed %s\\n", ev.Result.Attempts, ev.Result.Parsed)
\t\t}
\t}
}
`;
}

// py writes a JSON value as a Python literal.
function py(v, indent = '') {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string' || typeof v === 'number') return JSON.stringify(v);
  const inner = `${indent}    `;
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]';
    return `[\n${v.map((x) => inner + py(x, inner)).join(',\n')},\n${indent}]`;
  }
  const entries = Object.entries(v);
  if (entries.length === 0) return '{}';
  return `{\n${entries.map(([k, x]) => `${inner}${JSON.stringify(k)}: ${py(x, inner)}`).join(',\n')},\n${indent}}`;
}

function text(content) {
  const blocks = Array.isArray(content) ? content : [content];
  return blocks.filter((b) => b && b.type === 'text').map((b) => b.text).join('\n');
}

// openaiPython is the request as a call of OpenAI's Python SDK pointed at
// sampled's OpenAI dialect, which keeps the same guarantees.
export function openaiPython(origin, body, { toolsRequired } = {}) {
  const messages = [];
  if (body.systemPrompt) messages.push({ role: 'system', content: body.systemPrompt });
  if (body.prompt !== undefined) messages.push({ role: 'user', content: body.prompt });
  let dropped = false;
  for (const m of body.messages || []) {
    const blocks = Array.isArray(m.content) ? m.content : [m.content];
    if (blocks.some((b) => b.type !== 'text')) dropped = true;
    messages.push({ role: m.role, content: text(m.content) });
  }
  const args = [['model', body.model || null], ['messages', messages]];
  if (body.schema !== undefined) {
    args.push(['response_format', { type: 'json_schema', json_schema: { name: 'answer', schema: body.schema } }]);
  }
  if (body.tools) {
    args.push(['tools', body.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.inputSchema || { type: 'object' } },
    }))]);
    if (toolsRequired) args.push(['tool_choice', 'required']);
  }
  if (body.maxTokens) args.push(['max_tokens', body.maxTokens]);
  if (body.retries !== undefined) args.push(['extra_body', { sampled: { retries: body.retries } }]);
  const call = args.filter(([, v]) => v !== null).map(([k, v]) => `    ${k}=${py(v, '    ')},`).join('\n');
  return `import os

from openai import OpenAI

client = OpenAI(
    base_url=${JSON.stringify(`${origin}/openai/v1`)},
    api_key=os.environ.get("SAMPLED_API_KEY", "none"),  # any string when no keys are configured
)
${dropped ? '# Only the text blocks of the messages are carried over here.\n' : ''}resp = client.chat.completions.create(
${call}
)
print(resp.choices[0].message)
`;
}
