// startLoop, getLoop, listLoops, cancelLoop and events, and the
// resumption of events after a connection cut in the middle of an event.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Sampled } from "@sampled/client";

import { apiKey, collect, sampled } from "./helpers.mjs";

test("startLoop, events to loop.completed, getLoop, listLoops", async () => {
  const started = await sampled.startLoop({ prompt: "Please calculate 2 * (3 + 4)", allowedTools: ["std__*"], maxIterations: 5 });
  assert.match(started.id, /^loop_/);
  assert.equal(started.status, "running");
  const events = await collect(sampled.events(started.id));
  assert.equal(events[0].event, "loop.started");
  assert.equal(events[0].data.id, started.id);
  const names = events.map((e) => e.event);
  assert.ok(names.includes("tool.started") && names.includes("tool.completed"), names.join(" "));
  const done = events.at(-1);
  assert.equal(done.event, "loop.completed");
  assert.equal(done.data.status, "completed");
  assert.deepEqual(events.map((e) => e.id), events.map((_, i) => i + 1));

  const run = await sampled.getLoop(started.id);
  assert.equal(run.status, "completed");
  assert.match(run.result, /14/);
  assert.ok(run.messages.length >= 3);

  const page = await sampled.listLoops({ status: "completed", limit: 100 });
  assert.ok(page.loops.some((l) => l.id === started.id));
  const one = await sampled.listLoops({ limit: 1 });
  assert.equal(one.loops.length, 1);
});

test("events with lastEventId: only the events after it", async () => {
  const { id } = await sampled.startLoop({ prompt: "Please calculate 3 * 3" });
  const all = await collect(sampled.events(id));
  const rest = await collect(sampled.events(id, { lastEventId: 2 }));
  assert.deepEqual(rest, all.slice(2));
});

test("cancelLoop: a slow loop ends cancelled", async () => {
  const { id } = await sampled.startLoop({ prompt: "Please calculate 2 * (3 + 4)", model: "offline/slow" });
  const cancelling = await sampled.cancelLoop(id);
  assert.equal(cancelling.status, "cancelling");
  const events = await collect(sampled.events(id));
  assert.equal(events.at(-1).event, "loop.completed");
  assert.equal(events.at(-1).data.status, "cancelled");
  assert.equal((await sampled.getLoop(id)).status, "cancelled");
});

test("events resume after a connection cut mid-event: each event once, in order", async () => {
  const proxied = new Sampled({ baseUrl: process.env.PROXY_URL, apiKey });
  const { id } = await proxied.startLoop({ prompt: "Please calculate 2 * (3 + 4)", streamDeltas: true });
  const events = await collect(proxied.events(id, { reconnectDelay: 10 }));
  // The proxy cut the first connection in the middle of event 4.
  const seen = await (await fetch(`${process.env.PROXY_URL}/_proxy/seen?loop=${id}`)).json();
  assert.deepEqual(seen, ["", "3"]);
  assert.ok(events.length > 4);
  assert.deepEqual(events.map((e) => e.id), events.map((_, i) => i + 1));
  assert.equal(events.at(-1).event, "loop.completed");
  // The same as a stream read in one go.
  assert.deepEqual(events, await collect(sampled.events(id)));
});

test("events resume after a cut in the middle of a run: the rest arrives live, each event once", async () => {
  const proxied = new Sampled({ baseUrl: process.env.PROXY_URL, apiKey });
  // offline/slow takes 2 s per model call: the cut (in event 4,
  // tool.completed) comes while the second model call runs.
  const { id } = await proxied.startLoop({ prompt: "Please calculate 2 * (3 + 4)", model: "offline/slow" });
  const events = await collect(proxied.events(id, { reconnectDelay: 10 }));
  const seen = await (await fetch(`${process.env.PROXY_URL}/_proxy/seen?loop=${id}`)).json();
  assert.deepEqual(seen, ["", "3"]);
  assert.deepEqual(events.map((e) => e.id), events.map((_, i) => i + 1));
  assert.deepEqual(events.map((e) => e.event), [
    "loop.started",
    "model.completed",
    "tool.started",
    "tool.completed",
    "iteration.completed",
    "model.completed",
    "iteration.completed",
    "loop.completed",
  ]);
  assert.equal(events.at(-1).data.status, "completed");
});
