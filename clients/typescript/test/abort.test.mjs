// Every call takes an AbortSignal; an abort ends the call at once, also in
// the middle of a stream, and a timeout does the same.
import assert from "node:assert/strict";
import { test } from "node:test";

import { person, sampled, user } from "./helpers.mjs";

// offline/slow takes 2 s for every model call: an abort after 100 ms must
// end the call long before that.
const slow = { prompt: "take your time", model: "offline/slow" };

async function rejectsQuickly(promise, name, withinMs = 1500) {
  const t0 = performance.now();
  const err = await promise.then(
    () => assert.fail("the call did not fail"),
    (e) => e,
  );
  const took = performance.now() - t0;
  assert.equal(err.name, name, String(err));
  assert.ok(took < withinMs, `took ${took} ms`);
}

test("abort a sample in flight", async () => {
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 100);
  await rejectsQuickly(sampled.sample(slow, { signal: ac.signal }), "AbortError");
});

test("an aborted signal stops every call before it starts", async () => {
  const signal = AbortSignal.abort();
  const calls = [
    sampled.createMessage({ messages: user("hi"), maxTokens: 10 }, { signal }),
    sampled.sample({ prompt: "hi" }, { signal }),
    sampled.sampleSchema(person, { prompt: "hi" }, { signal }),
    sampled.sampleTools({ prompt: "hi", tools: [{ name: "t", inputSchema: { type: "object" } }] }, { signal }),
    sampled.startLoop({ prompt: "hi" }, { signal }),
    sampled.getLoop("loop_x", { signal }),
    sampled.listLoops({}, { signal }),
    sampled.cancelLoop("loop_x", { signal }),
    sampled.models({ signal }),
  ];
  for (const c of calls) await rejectsQuickly(c, "AbortError");
  await rejectsQuickly(sampled.events("loop_x", { signal }).next(), "AbortError");
  await rejectsQuickly(sampled.streamSample({ prompt: "hi" }, { signal }).next(), "AbortError");
});

test("the timeout option ends a call with TimeoutError", async () => {
  await rejectsQuickly(sampled.createMessage({ messages: user("hi"), maxTokens: 10, modelPreferences: { hints: [{ name: "slow" }] } }, { timeout: 100 }), "TimeoutError");
});

test("abort a stream between its events", async () => {
  const ac = new AbortController();
  const stream = sampled.streamMessage({ messages: user("a long enough answer to come in pieces"), maxTokens: 200, modelPreferences: { hints: [{ name: "slow" }] } }, { signal: ac.signal });
  const t0 = performance.now();
  setTimeout(() => ac.abort(), 100);
  const err = await (async () => {
    for await (const _ of stream) {
      // the deltas until the abort
    }
  })().catch((e) => e);
  assert.equal(err.name, "AbortError", String(err));
  assert.ok(performance.now() - t0 < 1500);
});

test("abort a loop's event stream while it waits for the next event", async () => {
  const { id } = await sampled.startLoop({ prompt: "Please calculate 1 + 1", model: "offline/slow" });
  const ac = new AbortController();
  const got = [];
  const t0 = performance.now();
  const err = await (async () => {
    for await (const e of sampled.events(id, { signal: ac.signal })) {
      got.push(e.event);
      if (e.event === "loop.started") setTimeout(() => ac.abort(), 50);
    }
  })().catch((e) => e);
  assert.equal(err.name, "AbortError", String(err));
  assert.deepEqual(got, ["loop.started"]);
  assert.ok(performance.now() - t0 < 1500);
  await sampled.cancelLoop(id);
});
