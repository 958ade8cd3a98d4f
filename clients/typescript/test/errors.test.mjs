// Problems become typed errors: 400 with its paths, 401, 404, 409, 422
// (also mid-stream), 429 with retryAfter.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  BadRequestError,
  ConflictError,
  NotFoundError,
  ProblemError,
  RateLimitError,
  Sampled,
  SampleValidationError,
  UnauthorizedError,
} from "@sampled/client";

import { baseUrl, collect, person, sampled, user, weather } from "./helpers.mjs";

test("400: BadRequestError with the JSON Pointer paths", async () => {
  const err = await sampled.sample({ prompt: "hi", maxTokens: 0 }).catch((e) => e);
  assert.ok(err instanceof BadRequestError, String(err));
  assert.ok(err instanceof ProblemError);
  assert.equal(err.status, 400);
  assert.deepEqual(err.errors.map((e) => e.path), ["/maxTokens"]);
  assert.equal(err.type, "https://sampled.dev/problems/invalid-request");
  assert.ok(err.requestId);
});

test("400 of createMessage: the path into the MCP params and JSON-RPC's code", async () => {
  const err = await sampled
    .createMessage({ messages: [{ role: "user", content: { type: "text" } }], maxTokens: 10 })
    .catch((e) => e);
  assert.ok(err instanceof BadRequestError, String(err));
  assert.equal(err.code, -32602);
  assert.ok(err.errors.some((e) => e.path === "/messages/0/content/text"), JSON.stringify(err.errors));
});

test("401: UnauthorizedError without a key and with a wrong one", async () => {
  // No key at all: none in the options, none in the environment.
  const envKey = process.env.SAMPLED_API_KEY;
  delete process.env.SAMPLED_API_KEY;
  try {
    for (const apiKey of [undefined, "not-a-key"]) {
      const err = await new Sampled({ baseUrl, apiKey }).sample({ prompt: "hi" }).catch((e) => e);
      assert.ok(err instanceof UnauthorizedError, String(err));
      assert.equal(err.status, 401);
    }
  } finally {
    process.env.SAMPLED_API_KEY = envKey;
  }
});

test("404: NotFoundError for a loop that does not exist", async () => {
  for (const call of [() => sampled.getLoop("loop_0000000000000000"), () => sampled.cancelLoop("loop_0000000000000000")]) {
    const err = await call().catch((e) => e);
    assert.ok(err instanceof NotFoundError, String(err));
    assert.equal(err.type, "https://sampled.dev/problems/loop-not-found");
  }
  const err = await (async () => {
    for await (const _ of sampled.events("loop_0000000000000000")) {
      // none
    }
  })().catch((e) => e);
  assert.ok(err instanceof NotFoundError, String(err));
});

test("409: ConflictError cancelling a finished loop", async () => {
  const { id } = await sampled.startLoop({ prompt: "Please calculate 1 + 1" });
  await collect(sampled.events(id));
  const err = await sampled.cancelLoop(id).catch((e) => e);
  assert.ok(err instanceof ConflictError, String(err));
  assert.equal(err.status, 409);
});

test("422: SampleValidationError with attempts, lastResult and errors", async () => {
  const err = await sampled
    .sampleTools({ prompt: "weather in Paris", model: "offline/broken", retries: 1, tools: [weather] })
    .catch((e) => e);
  assert.ok(err instanceof SampleValidationError, String(err));
  assert.equal(err.status, 422);
  assert.equal(err.method, "sampleTools");
  assert.equal(err.attempts, 2);
  assert.equal(err.lastResult.provider, "offline");
  assert.ok(err.errors.length > 0 && err.errors.every((e) => typeof e.path === "string"));

  const schemaErr = await sampled.sampleSchema(person, { prompt: "A person", model: "offline/broken", retries: 0 }).catch((e) => e);
  assert.ok(schemaErr instanceof SampleValidationError, String(schemaErr));
  assert.equal(schemaErr.method, "sampleSchema");
  assert.equal(schemaErr.attempts, 1);
  assert.ok(schemaErr.lastResult.parseError);
});

test("422 in a stream: the error event is thrown as SampleValidationError after the deltas", async () => {
  const seen = [];
  const err = await (async () => {
    for await (const e of sampled.streamSampleSchema(person, { prompt: "A person", model: "offline/broken", retries: 1 })) {
      seen.push(e.event);
    }
  })().catch((e) => e);
  assert.ok(err instanceof SampleValidationError, String(err));
  assert.equal(err.attempts, 2);
  assert.ok(seen.includes("delta") && seen.includes("attempt"), seen.join(" "));
  assert.ok(!seen.includes("result"));
});

test("422 of createMessage: method sample", async () => {
  const err = await sampled
    .createMessage({
      messages: user("weather in Paris"),
      tools: [weather],
      toolChoice: { mode: "required" },
      maxTokens: 100,
      modelPreferences: { hints: [{ name: "broken" }] },
    })
    .catch((e) => e);
  assert.ok(err instanceof SampleValidationError, String(err));
  assert.equal(err.method, "sample");
});

test("429: RateLimitError with retryAfter and limit", async () => {
  const limited = new Sampled({ baseUrl, apiKey: process.env.LIMITED_KEY });
  await limited.sample({ prompt: "the one request of this minute" });
  const err = await limited.sample({ prompt: "one too many" }).catch((e) => e);
  assert.ok(err instanceof RateLimitError, String(err));
  assert.equal(err.status, 429);
  assert.equal(err.limit, "requests");
  assert.ok(Number.isInteger(err.retryAfter) && err.retryAfter >= 1, `retryAfter ${err.retryAfter}`);
});
