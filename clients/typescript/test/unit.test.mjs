// The client against small local servers that misbehave in ways sampled
// does not: SSE framing edge cases, a stream that keeps dropping, bodies
// that are not problems or not JSON.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";

import { ProblemError, readSSE, Sampled, StreamDataError, UpstreamError } from "@sampled/client";

// serve answers each request with handler, on a loopback port, for one test.
async function serve(t, handler) {
  const server = createServer(handler);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return { client: new Sampled({ baseUrl: `http://127.0.0.1:${server.address().port}`, apiKey: "k" }), server };
}

function streamOf(...chunks) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const s of chunks) c.enqueue(enc.encode(s));
      c.close();
    },
  });
}

test("readSSE: CRLF and CR line ends, multi-line data, comments, split chunks, a cut last event", async () => {
  const got = [];
  const body = streamOf(": heartbeat\r\n\r\nid: 1\r\nevent: a\r\ndata: x\r", "\ndata: y\r\n\r\nid: 2\revent: b\rdata: {\"k\":", "1}\r\rid: 3\nevent: c\ndata: cut");
  for await (const m of readSSE(body)) got.push(m);
  assert.deepEqual(got, [
    { id: "1", event: "a", data: "x\ny" },
    { id: "2", event: "b", data: '{"k":1}' },
  ]);
});

test("events: a stream that drops without events is given up after maxReconnects, with no event twice", async (t) => {
  let calls = 0;
  const lastIds = [];
  const { client } = await serve(t, (req, res) => {
    calls++;
    lastIds.push(req.headers["last-event-id"] ?? "");
    res.writeHead(200, { "content-type": "text/event-stream" });
    // The first connection brings events 1 and 2, the next ones repeat 2.
    if (calls === 1) res.end('id: 1\nevent: loop.started\ndata: {"id":"loop_x"}\n\nid: 2\nevent: model.completed\ndata: {"iteration":1}\n\n');
    else res.end('id: 2\nevent: model.completed\ndata: {"iteration":1}\n\n');
  });
  const seen = [];
  const err = await (async () => {
    for await (const e of client.events("loop_x", { maxReconnects: 3, reconnectDelay: 1 })) seen.push(e.id);
  })().catch((e) => e);
  assert.match(String(err?.message), /gave up after 3 reconnections/);
  assert.deepEqual(seen, [1, 2]);
  assert.deepEqual(lastIds, ["", "2", "2", "2"]);
});

test("events: data that is not JSON is a StreamDataError, not retried", async (t) => {
  let calls = 0;
  const { client } = await serve(t, (req, res) => {
    calls++;
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end("id: 1\nevent: loop.started\ndata: {nope\n\n");
  });
  const err = await client.events("loop_x").next().catch((e) => e);
  assert.ok(err instanceof StreamDataError, String(err));
  assert.equal(calls, 1);
});

test("a failure that is not a problem document still throws by its status", async (t) => {
  const { client } = await serve(t, (req, res) => {
    res.writeHead(502, { "content-type": "text/html", "retry-after": "7" });
    res.end("<html>bad gateway</html>");
  });
  const err = await client.sample({ prompt: "hi" }).catch((e) => e);
  assert.ok(err instanceof UpstreamError && err instanceof ProblemError, String(err));
  assert.equal(err.status, 502);
  assert.equal(err.retryAfter, 7);
  assert.match(err.detail, /bad gateway/);
});

test("the JSON methods send no stream member, with the key and JSON headers", async (t) => {
  const bodies = [];
  const { client } = await serve(t, (req, res) => {
    let b = "";
    req.on("data", (c) => (b += c));
    req.on("end", () => {
      bodies.push({ body: JSON.parse(b), auth: req.headers.authorization, type: req.headers["content-type"] });
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await client.sample({ prompt: "hi", stream: true });
  await client.sampleTools({ prompt: "hi", tools: [], stream: true });
  assert.deepEqual(bodies.map((b) => b.body), [{ prompt: "hi" }, { prompt: "hi", tools: [] }]);
  assert.ok(bodies.every((b) => b.auth === "Bearer k" && b.type === "application/json"));
});

test("events: a 503 is retried after its Retry-After, a 4xx is not", async (t) => {
  const answers = [
    [503, { "content-type": "application/problem+json", "retry-after": "1" }, '{"type":"https://sampled.dev/problems/not-ready","title":"Not ready","status":503}'],
    [200, { "content-type": "text/event-stream" }, 'id: 1\nevent: loop.started\ndata: {"id":"loop_x"}\n\n'],
    [410, { "content-type": "application/problem+json" }, '{"type":"https://sampled.dev/problems/events-expired","title":"Gone","status":410}'],
  ];
  const at = [];
  const { client } = await serve(t, (req, res) => {
    at.push(performance.now());
    const [status, headers, body] = answers[at.length - 1] ?? answers.at(-1);
    res.writeHead(status, headers);
    res.end(body);
  });
  const seen = [];
  const err = await (async () => {
    for await (const e of client.events("loop_x", { reconnectDelay: 1 })) seen.push(e.event);
  })().catch((e) => e);
  assert.deepEqual(seen, ["loop.started"]);
  assert.equal(err?.status, 410, String(err));
  assert.equal(at.length, 3);
  assert.ok(at[1] - at[0] >= 950, `retried after ${at[1] - at[0]} ms; Retry-After said 1 s`);
});
