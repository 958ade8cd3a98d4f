import { errorFromResponse, problemError, ProblemError } from "./errors.js";
import { readSSE } from "./sse.js";
/**
 * Sampled is a client of sampled's HTTP API. Every method takes an
 * optional `CallOptions` with an `AbortSignal`; failures are thrown as
 * `ProblemError`s (`SampleValidationError`, `RateLimitError`, …).
 */
export class Sampled {
    #baseUrl;
    #apiKey;
    #fetch;
    #headers;
    /**
     * A client of the service at `options.baseUrl`. What the options leave
     * out is read from the environment (Node's `process.env`) at each
     * request: `SAMPLED_URL`, `SAMPLED_API_KEY`.
     */
    constructor(options = {}) {
        this.#baseUrl = options.baseUrl;
        this.#apiKey = options.apiKey;
        this.#fetch = options.fetch;
        this.#headers = { ...options.headers };
    }
    /** The service's URL, without a trailing slash. */
    get baseUrl() {
        return (this.#baseUrl ?? env("SAMPLED_URL") ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
    }
    async createMessage(params, options) {
        const body = params;
        return (await this.#json("POST", "/v1/messages", body, options));
    }
    /** One sampling request (`POST /v1/sample`): plain, schema (`parsed`/`parseError`) or tools mode (`toolCalls`). */
    async sample(request, options) {
        return (await this.#json("POST", "/v1/sample", withoutStream(request), options));
    }
    /**
     * A value that validates against `schema` (`POST /v1/sample/schema`):
     * the service retries with corrective feedback and throws
     * `SampleValidationError` when the attempts run out. `schema` is a JSON
     * Schema or a Zod 4 schema (converted with Zod's own `toJSONSchema`);
     * `parsed` is typed by the Zod schema, or by `T`.
     */
    async sampleSchema(schema, request, options) {
        const body = { ...withoutStream(request), schema: await toJSONSchema(schema) };
        return (await this.#json("POST", "/v1/sample/schema", body, options));
    }
    /**
     * At least one valid tool call (`POST /v1/sample/tools`): every call
     * names a declared tool and its arguments validate against the tool's
     * `inputSchema`; `SampleValidationError` when the attempts run out.
     */
    async sampleTools(request, options) {
        return (await this.#json("POST", "/v1/sample/tools", withoutStream(request), options));
    }
    /** `sample`, streamed: the deltas as they come, then the result. */
    streamSample(request, options) {
        return this.#stream("/v1/sample", request, options);
    }
    /** `sampleSchema`, streamed: each attempt's deltas, `attempt` events between them, then the result. */
    async *streamSampleSchema(schema, request, options) {
        const body = { ...request, schema: await toJSONSchema(schema) };
        yield* this.#stream("/v1/sample/schema", body, options);
    }
    /** `sampleTools`, streamed. */
    streamSampleTools(request, options) {
        return this.#stream("/v1/sample/tools", request, options);
    }
    /** `createMessage`, streamed: the deltas, then the MCP result. */
    streamMessage(params, options) {
        return this.#stream("/v1/messages", params, options);
    }
    /** Starts a tool loop (`POST /v1/loops`); follow it with `events(id)`. */
    async startLoop(request, options) {
        return (await this.#json("POST", "/v1/loops", request, options));
    }
    /** A loop run as it stands: status, transcript, result (`GET /v1/loops/{id}`). */
    async getLoop(id, options) {
        return (await this.#json("GET", `/v1/loops/${encodeURIComponent(id)}`, undefined, options));
    }
    /** A page of runs, newest first (`GET /v1/loops`); pass `next` as `cursor` for the following page. */
    async listLoops(query = {}, options) {
        const q = new URLSearchParams();
        for (const [k, v] of Object.entries(query)) {
            if (v !== undefined && v !== null)
                q.set(k, String(v));
        }
        const qs = q.size > 0 ? `?${q}` : "";
        return (await this.#json("GET", `/v1/loops${qs}`, undefined, options));
    }
    /** Cancels a running loop (`DELETE /v1/loops/{id}`); a finished one throws `ConflictError`. */
    async cancelLoop(id, options) {
        return (await this.#json("DELETE", `/v1/loops/${encodeURIComponent(id)}`, undefined, options));
    }
    /** The configured models (`GET /v1/models`). */
    async models(options) {
        return (await this.#json("GET", "/v1/models", undefined, options));
    }
    /** The tools loops can call, and their MCP servers (`GET /v1/tools`). */
    async tools(options) {
        return (await this.#json("GET", "/v1/tools", undefined, options));
    }
    /**
     * The events of a loop (`GET /v1/loops/{id}/events`), ending after
     * `loop.completed`. When the connection drops, or the stream ends before
     * that event, it reconnects with `Last-Event-ID` set to the last event it
     * yielded: each event comes once, in order, and an event cut in the
     * middle is never yielded. A 5xx answer (503 while the service shuts
     * down or its run store does not answer) is retried like a drop, after
     * its `Retry-After` when it has one. It throws on a 4xx answer (404
     * `NotFoundError`, 410 `GoneError`, …), when the signal aborts, and
     * after `maxReconnects` connections in a row that brought no event.
     * Events of names this version does not know are skipped.
     */
    async *events(id, options = {}) {
        const signal = callSignal(options);
        const maxReconnects = options.maxReconnects ?? 6;
        const firstDelay = options.reconnectDelay ?? 100;
        let last = options.lastEventId;
        let failures = 0;
        let delay = firstDelay;
        let lastError;
        let wait = 0;
        const path = `/v1/loops/${encodeURIComponent(id)}/events`;
        for (;;) {
            signal?.throwIfAborted();
            let progressed = false;
            wait = 0;
            try {
                const headers = { accept: "text/event-stream" };
                if (last !== undefined)
                    headers["last-event-id"] = String(last);
                const res = await this.#send("GET", path, undefined, { signal, headers: { ...options.headers, ...headers } });
                if (!res.ok)
                    throw await errorFromResponse(res);
                if (!isEventStream(res) || res.body === null) {
                    throw new ProblemError({ type: "about:blank", title: "Not an event stream", status: res.status });
                }
                for await (const m of readSSE(res.body)) {
                    const n = m.id === undefined ? NaN : Number(m.id);
                    if (!Number.isInteger(n))
                        continue;
                    if (last !== undefined && n <= last)
                        continue; // never twice
                    const known = KNOWN_LOOP_EVENTS.has(m.event);
                    const ev = known ? { id: n, event: m.event, data: parseData(m.data, m.event) } : undefined;
                    last = n;
                    progressed = true;
                    failures = 0;
                    delay = firstDelay;
                    if (ev === undefined)
                        continue;
                    yield ev;
                    if (ev.event === "loop.completed")
                        return;
                }
                lastError = new Error("the event stream ended before loop.completed");
            }
            catch (err) {
                if (signal?.aborted)
                    throw signal.reason;
                // The service said no, or sent what cannot be read: no retry helps.
                if (err instanceof StreamDataError)
                    throw err;
                if (err instanceof ProblemError) {
                    if (err.status < 500)
                        throw err;
                    wait = (err.retryAfter ?? 0) * 1000;
                }
                lastError = err;
            }
            if (!progressed)
                failures++;
            if (failures >= maxReconnects) {
                throw new Error(`events of ${id}: gave up after ${failures} reconnections without an event`, { cause: lastError });
            }
            await sleep(Math.max(delay, wait), signal);
            delay = Math.min(delay * 2, 5000);
        }
    }
    // ---------------------------------------------------------------- plumbing
    async #send(method, path, body, options = {}) {
        const headers = { accept: "application/json, application/problem+json", ...this.#headers };
        const apiKey = this.#apiKey ?? env("SAMPLED_API_KEY");
        if (apiKey !== undefined)
            headers["authorization"] = `Bearer ${apiKey}`;
        if (body !== undefined)
            headers["content-type"] = "application/json";
        Object.assign(headers, options.headers);
        const init = { method, headers };
        if (body !== undefined)
            init.body = JSON.stringify(body);
        const signal = callSignal(options);
        if (signal)
            init.signal = signal;
        return (this.#fetch ?? globalThis.fetch)(this.baseUrl + path, init);
    }
    async #json(method, path, body, options) {
        const res = await this.#send(method, path, body, options);
        if (!res.ok)
            throw await errorFromResponse(res);
        return res.json();
    }
    async *#stream(route, body, options = {}) {
        const signal = callSignal(options);
        const res = await this.#send("POST", route, body, {
            signal,
            headers: { ...options.headers, accept: "text/event-stream" },
        });
        if (!res.ok)
            throw await errorFromResponse(res);
        if (!isEventStream(res) || res.body === null) {
            throw new ProblemError({ type: "about:blank", title: "Not an event stream", status: res.status });
        }
        const requestId = res.headers.get("x-request-id") ?? undefined;
        for await (const m of readSSE(res.body)) {
            switch (m.event) {
                case "delta":
                case "attempt":
                    yield { event: m.event, data: parseData(m.data, m.event) };
                    break;
                case "result":
                    yield { event: "result", data: parseData(m.data, m.event) };
                    return;
                case "error":
                    throw problemError(parseData(m.data, m.event), { requestId });
                default:
                // an event this version does not know
            }
        }
        throw new Error(`${route}: the stream ended without a result`);
    }
}
const KNOWN_LOOP_EVENTS = new Set([
    "loop.started",
    "model.delta",
    "model.completed",
    "tool.started",
    "tool.completed",
    "iteration.completed",
    "loop.completed",
]);
/** env reads a variable of Node's environment; undefined elsewhere, or when empty. */
function env(name) {
    const p = globalThis.process;
    const v = p?.env?.[name];
    return v === "" ? undefined : v;
}
/** StreamDataError: an event's data is not JSON. */
export class StreamDataError extends Error {
}
function parseData(data, event) {
    try {
        return JSON.parse(data);
    }
    catch (err) {
        throw new StreamDataError(`the data of a ${event} event is not JSON`, { cause: err });
    }
}
/** The request without `stream`: the JSON methods read one JSON answer. */
function withoutStream(request) {
    const { stream: _stream, ...rest } = request;
    return rest;
}
function isEventStream(res) {
    return (res.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream");
}
/** The signal of a call: its own, its timeout, both, or none. */
function callSignal(options) {
    const signals = [];
    if (options.signal)
        signals.push(options.signal);
    if (options.timeout !== undefined)
        signals.push(AbortSignal.timeout(options.timeout));
    if (signals.length === 0)
        return undefined;
    if (signals.length === 1)
        return signals[0];
    return AbortSignal.any(signals);
}
function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted)
            return reject(signal.reason);
        const onAbort = () => {
            clearTimeout(timer);
            reject(signal?.reason);
        };
        const timer = setTimeout(() => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
        }, ms);
        signal?.addEventListener("abort", onAbort, { once: true });
    });
}
/**
 * toJSONSchema gives the JSON Schema of a schema argument: a JSON Schema
 * as it is; a Zod 4 schema through Zod's own conversion, the schema's
 * `toJSONSchema()` method, or for schemas without it (`zod/mini`) the
 * `toJSONSchema` function of `zod/v4/core`, imported only then. A Zod 3
 * schema has no JSON Schema conversion of Zod's own and is refused.
 */
export async function toJSONSchema(schema) {
    const s = schema;
    if (s !== null && typeof s === "object" && "_zod" in s) {
        if (typeof s["toJSONSchema"] === "function") {
            return s["toJSONSchema"]();
        }
        const core = (await import("zod/v4/core"));
        return core.toJSONSchema(schema);
    }
    if (s !== null && typeof s === "object" && "_def" in s && "safeParse" in s) {
        throw new TypeError("a Zod 3 schema cannot be converted: use zod/v4 (z.object from 'zod' 4, or 'zod/v4' of zod 3.25)");
    }
    return schema;
}
