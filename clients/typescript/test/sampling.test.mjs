// createMessage, sample, sampleSchema and sampleTools against the offline
// provider, and their streamed forms.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as z from "zod";

import { collect, person, sampled, user, weather } from "./helpers.mjs";

test("createMessage: MCP params in, MCP result out (one text block)", async () => {
  const res = await sampled.createMessage({
    messages: user("What is the capital of France?"),
    modelPreferences: { hints: [{ name: "default" }] },
    systemPrompt: "Be brief.",
    maxTokens: 100,
  });
  assert.equal(res.role, "assistant");
  assert.equal(res.content.type, "text");
  assert.match(res.content.text, /capital of France/);
  assert.equal(res.model, "default");
  assert.equal(res.stopReason, "endTurn");
});

test("createMessage with tools: a tool_use block for a declared tool, valid input", async () => {
  const res = await sampled.createMessage({
    messages: user("What is the weather in Paris?"),
    tools: [weather],
    toolChoice: { mode: "required" },
    maxTokens: 200,
  });
  assert.equal(res.stopReason, "toolUse");
  const blocks = Array.isArray(res.content) ? res.content : [res.content];
  const uses = blocks.filter((b) => b.type === "tool_use");
  assert.ok(uses.length >= 1, JSON.stringify(res));
  assert.equal(uses[0].name, "get_weather");
  assert.equal(typeof uses[0].input.city, "string");
});

test("sample: plain, schema and tools mode", async () => {
  const plain = await sampled.sample({ prompt: "Name three rivers in France" });
  assert.match(plain.text, /rivers in France/);
  assert.equal(plain.attempts, 1);
  assert.ok(plain.usage.inputTokens > 0);

  const schema = await sampled.sample({ prompt: "Describe Paris", schema: person });
  assert.equal(typeof schema.parsed.name, "string");

  const tools = await sampled.sample({ prompt: "What is the weather in Paris?", tools: [weather] });
  assert.equal(tools.toolCalls[0].name, "get_weather");
  assert.equal(typeof tools.toolCalls[0].arguments.city, "string");
});

test("sampleSchema with a JSON Schema: offline/flaky's broken first attempt is corrected", async () => {
  const res = await sampled.sampleSchema(person, { prompt: "A person", model: "offline/flaky" });
  assert.equal(res.attempts, 2);
  assert.equal(typeof res.parsed.name, "string");
});

test("sampleSchema with a Zod schema: converted by Zod, the value fits it", async () => {
  const Person = z.object({ name: z.string(), age: z.number().int().min(0) });
  const res = await sampled.sampleSchema(Person, { prompt: "Invent a person", model: "offline/flaky" });
  assert.equal(res.attempts, 2);
  assert.deepEqual(Person.parse(res.parsed), res.parsed);
});

test("sampleTools: a valid call, after offline/flaky's first attempt without one", async () => {
  const res = await sampled.sampleTools({ prompt: "weather in Paris", model: "offline/flaky", tools: [weather] });
  assert.equal(res.attempts, 2);
  assert.equal(res.toolCalls.length, 1);
  assert.equal(res.toolCalls[0].name, "get_weather");
  assert.equal(res.toolCalls[0].arguments.city, "Paris");
});

test("models and tools list what the service has", async () => {
  const models = await sampled.models();
  assert.ok(models.models.some((m) => m.id === "offline/flaky"), JSON.stringify(models));
  const tools = await sampled.tools();
  assert.ok(tools.tools.some((t) => t.name === "std__calculate"));
});

test("streamSample: the deltas joined are the result's text", async () => {
  const events = await collect(sampled.streamSample({ prompt: "Name three rivers in France" }));
  const deltas = events.filter((e) => e.event === "delta");
  assert.ok(deltas.length >= 2, `only ${deltas.length} deltas`);
  const last = events.at(-1);
  assert.equal(last.event, "result");
  assert.equal(deltas.map((d) => d.data.text).join(""), last.data.text);
});

test("streamSampleSchema: attempt 1's deltas, an attempt event with its errors, attempt 2's deltas, the result", async () => {
  const events = await collect(sampled.streamSampleSchema(person, { prompt: "A person", model: "offline/flaky" }));
  const names = events.map((e) => (e.event === "delta" ? `delta${e.data.attempt}` : e.event));
  const retry = names.indexOf("attempt");
  assert.ok(retry > 0 && names.slice(0, retry).every((n) => n === "delta1"), names.join(" "));
  assert.ok(names.slice(retry + 1, -1).every((n) => n === "delta2") && names.at(-1) === "result", names.join(" "));
  assert.ok(events[retry].data.errors.length > 0);
  const result = events.at(-1).data;
  assert.equal(result.attempts, 2);
  const secondText = events.filter((e) => e.event === "delta" && e.data.attempt === 2).map((e) => e.data.text).join("");
  assert.deepEqual(JSON.parse(secondText), result.parsed);
});

test("streamSampleTools: tool call deltas carry the call's id and name", async () => {
  const events = await collect(sampled.streamSampleTools({ prompt: "weather in Paris", tools: [weather] }));
  const calls = events.filter((e) => e.event === "delta" && e.data.toolCall);
  assert.ok(calls.length >= 1);
  const result = events.at(-1).data;
  assert.equal(calls[0].data.toolCall.id, result.toolCalls[0].id);
  assert.deepEqual(JSON.parse(calls.map((c) => c.data.toolCall.arguments ?? "").join("")), result.toolCalls[0].arguments);
});

test("streamMessage: the deltas, then the MCP result", async () => {
  const events = await collect(sampled.streamMessage({ messages: user("hello there"), maxTokens: 50 }));
  const last = events.at(-1);
  assert.equal(last.event, "result");
  assert.equal(last.data.role, "assistant");
  assert.equal(last.data.content.type, "text");
  assert.equal(events.filter((e) => e.event === "delta").map((e) => e.data.text).join(""), last.data.content.text);
});

test("the default client reads SAMPLED_URL and SAMPLED_API_KEY", async () => {
  const { sampled: fromEnv } = await import("@sampled/client");
  assert.equal(fromEnv.baseUrl, process.env.SAMPLED_URL);
  const res = await fromEnv.createMessage({ messages: user("hi"), maxTokens: 20 });
  assert.equal(res.role, "assistant");
});

test("sampleSchema with a zod/mini schema: converted by zod/v4/core's toJSONSchema", async () => {
  const zm = await import("zod/mini");
  const Person = zm.object({ name: zm.string() });
  assert.equal(typeof Person.toJSONSchema, "undefined");
  const res = await sampled.sampleSchema(Person, { prompt: "A person" });
  assert.equal(typeof res.parsed.name, "string");
  assert.deepEqual(zm.parse(Person, res.parsed), res.parsed);
});

test("sampleSchema refuses a Zod 3 schema rather than send it as a JSON Schema", async () => {
  const z3 = await import("zod/v3");
  await assert.rejects(sampled.sampleSchema(z3.object({ name: z3.string() }), { prompt: "A person" }), TypeError);
});
