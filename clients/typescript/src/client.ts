import type {
  CreateMessageRequest,
  CreateMessageRequestParamsBase,
  CreateMessageRequestParamsWithTools,
  CreateMessageResult,
  CreateMessageResultWithTools,
} from "@modelcontextprotocol/sdk/types.js";

import { errorFromResponse, problemError, ProblemError, type Problem } from "./errors.js";
import type { components, operations } from "./openapi.js";
import { readSSE } from "./sse.js";

type Schemas = components["schemas"];

/** The body of `POST /v1/sample` (prompt or messages, schema or tools, …). */
export type SampleRequest = Schemas["SampleRequest"];
/** The body of `POST /v1/sample/tools`: `tools` is required. */
export type SampleToolsRequest = Schemas["SampleToolsRequest"];
/** The answer of `POST /v1/sample` and its helpers. */
export type SampleResult = Schemas["SampleResult"];
/** A tools-mode answer with at least one valid call. */
export type SampleToolsResult = Schemas["SampleToolsResult"];
/** A JSON Schema (2020-12) as sampled takes it. */
export type JSONSchema = Schemas["JSONSchema"];
/** The body of `POST /v1/loops`. */
export type LoopRequest = Schemas["LoopRequest"];
export type LoopCreated = Schemas["LoopCreated"];
export type LoopRun = Schemas["LoopRun"];
export type LoopList = Schemas["LoopList"];
export type LoopSummary = Schemas["LoopSummary"];
export type LoopCancelling = Schemas["LoopCancelling"];
export type LoopStatus = Schemas["LoopStatus"];
/** One event of a loop's stream, `{id, event, data}`, told apart by `event`. */
export type LoopEvent = Schemas["LoopEvent"];
export type ModelList = Schemas["ModelList"];
export type ToolList = Schemas["ToolList"];
/** The query of `GET /v1/loops`. */
export type ListLoopsQuery = NonNullable<operations["listLoops"]["parameters"]["query"]>;

/**
 * One event of a streamed answer: `delta` (a piece of an attempt's text or
 * of a tool call's arguments), `attempt` (a guaranteed helper starts over
 * after the errors it names) and, last, `result`. A stream's `error` event
 * is thrown as the typed error instead.
 */
export type StreamEvent<R = SampleResult> =
  | { event: "delta"; data: Schemas["SampleDelta"] }
  | { event: "attempt"; data: Schemas["SampleAttempt"] }
  | { event: "result"; data: R };

/** The request body of a guaranteed schema answer, without the schema, which is given apart. */
export type SampleSchemaRequest = Omit<SampleRequest, "schema" | "tools" | "toolChoice" | "stream">;

/**
 * A Zod 4 schema, seen structurally: the client imports no zod. Its
 * output type is what `sampleSchema` returns in `parsed`.
 */
export interface ZodSchemaLike<T> {
  readonly _zod: { readonly output: T };
}

/** The answer of `sampleSchema`: `parsed` validates against the schema. */
export type SampleSchemaResult<T> = Omit<SampleResult, "parsed" | "parseError" | "toolCalls"> & { parsed: T };

/** Options of one call. */
export interface CallOptions {
  /** Aborts the request (and, for streams, the reading). */
  signal?: AbortSignal | undefined;
  /** Milliseconds before the call is aborted with a TimeoutError. */
  timeout?: number | undefined;
  /** Extra request headers (`X-Request-ID`, say). */
  headers?: Record<string, string> | undefined;
}

/** Options of `events`. */
export interface EventsOptions extends CallOptions {
  /** Resume after this event id (the last one already seen). */
  lastEventId?: number | undefined;
  /** Reconnections in a row that bring no event before giving up; default 6. */
  maxReconnects?: number | undefined;
  /** First wait before reconnecting in milliseconds, doubled each time up to 5 s; default 100. */
  reconnectDelay?: number | undefined;
}

/** Options of the client. */
export interface ClientOptions {
  /** The service's URL; default the environment's `SAMPLED_URL`, else `http://127.0.0.1:8080`. */
  baseUrl?: string | undefined;
  /** An API key, sent as `Authorization: Bearer <key>`; default the environment's `SAMPLED_API_KEY`, if set. */
  apiKey?: string | undefined;
  /** A fetch to use in place of the global one. */
  fetch?: typeof fetch | undefined;
  /** Headers sent with every request. */
  headers?: Record<string, string> | undefined;
}

type Route = "/v1/sample" | "/v1/sample/schema" | "/v1/sample/tools" | "/v1/messages";

/**
 * Sampled is a client of sampled's HTTP API. Every method takes an
 * optional `CallOptions` with an `AbortSignal`; failures are thrown as
 * `ProblemError`s (`SampleValidationError`, `RateLimitError`, …).
 */
export class Sampled {
  readonly #baseUrl: string | undefined;
  readonly #apiKey: string | undefined;
  readonly #fetch: typeof fetch | undefined;
  readonly #headers: Record<string, string>;

  /**
   * A client of the service at `options.baseUrl`. What the options leave
   * out is read from the environment (Node's `process.env`) at each
   * request: `SAMPLED_URL`, `SAMPLED_API_KEY`.
   */
  constructor(options: ClientOptions = {}) {
    this.#baseUrl = options.baseUrl;
    this.#apiKey = options.apiKey;
    this.#fetch = options.fetch;
    this.#headers = { ...options.headers };
  }

  /** The service's URL, without a trailing slash. */
  get baseUrl(): string {
    return (this.#baseUrl ?? env("SAMPLED_URL") ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
  }

  /**
   * MCP's `sampling/createMessage`, answered by sampled (`POST
   * /v1/messages`): the MCP SDK's own params and result types, so that
   * `server.server.createMessage(params)` becomes
   * `sampled.createMessage(params)`. With `tools` the answer's `tool_use`
   * blocks name declared tools with valid arguments, and `toolChoice`
   * holds.
   */
  createMessage(params: CreateMessageRequestParamsBase, options?: CallOptions): Promise<CreateMessageResult>;
  createMessage(params: CreateMessageRequestParamsWithTools, options?: CallOptions): Promise<CreateMessageResultWithTools>;
  createMessage(
    params: CreateMessageRequest["params"],
    options?: CallOptions,
  ): Promise<CreateMessageResult | CreateMessageResultWithTools>;
  async createMessage(
    params: CreateMessageRequest["params"],
    options?: CallOptions,
  ): Promise<CreateMessageResult | CreateMessageResultWithTools> {
    const body: Schemas["CreateMessageRequest"] = params as Schemas["CreateMessageRequest"];
    return (await this.#json("POST", "/v1/messages", body, options)) as CreateMessageResult | CreateMessageResultWithTools;
  }

  /** One sampling request (`POST /v1/sample`): plain, schema (`parsed`/`parseError`) or tools mode (`toolCalls`). */
  async sample(request: SampleRequest, options?: CallOptions): Promise<SampleResult> {
    return (await this.#json("POST", "/v1/sample", withoutStream(request), options)) as SampleResult;
  }

  /**
   * A value that validates against `schema` (`POST /v1/sample/schema`):
   * the service retries with corrective feedback and throws
   * `SampleValidationError` when the attempts run out. `schema` is a JSON
   * Schema or a Zod 4 schema (converted with Zod's own `toJSONSchema`);
   * `parsed` is typed by the Zod schema, or by `T`.
   */
  async sampleSchema<T = unknown>(
    schema: ZodSchemaLike<T> | JSONSchema,
    request: SampleSchemaRequest,
    options?: CallOptions,
  ): Promise<SampleSchemaResult<T>> {
    const body = { ...withoutStream(request), schema: await toJSONSchema(schema) };
    return (await this.#json("POST", "/v1/sample/schema", body, options)) as SampleSchemaResult<T>;
  }

  /**
   * At least one valid tool call (`POST /v1/sample/tools`): every call
   * names a declared tool and its arguments validate against the tool's
   * `inputSchema`; `SampleValidationError` when the attempts run out.
   */
  async sampleTools(request: SampleToolsRequest, options?: CallOptions): Promise<SampleToolsResult> {
    return (await this.#json("POST", "/v1/sample/tools", withoutStream(request), options)) as SampleToolsResult;
  }

  /** `sample`, streamed: the deltas as they come, then the result. */
  streamSample(request: SampleRequest, options?: CallOptions): AsyncGenerator<StreamEvent<SampleResult>> {
    return this.#stream<SampleResult>("/v1/sample", request, options);
  }

  /** `sampleSchema`, streamed: each attempt's deltas, `attempt` events between them, then the result. */
  async *streamSampleSchema<T = unknown>(
    schema: ZodSchemaLike<T> | JSONSchema,
    request: SampleSchemaRequest,
    options?: CallOptions,
  ): AsyncGenerator<StreamEvent<SampleSchemaResult<T>>> {
    const body = { ...request, schema: await toJSONSchema(schema) };
    yield* this.#stream<SampleSchemaResult<T>>("/v1/sample/schema", body, options);
  }

  /** `sampleTools`, streamed. */
  streamSampleTools(request: SampleToolsRequest, options?: CallOptions): AsyncGenerator<StreamEvent<SampleToolsResult>> {
    return this.#stream<SampleToolsResult>("/v1/sample/tools", request, options);
  }

  /** `createMessage`, streamed: the deltas, then the MCP result. */
  streamMessage(
    params: CreateMessageRequest["params"],
    options?: CallOptions,
  ): AsyncGenerator<StreamEvent<CreateMessageResult | CreateMessageResultWithTools>> {
    return this.#stream("/v1/messages", params, options);
  }

  /** Starts a tool loop (`POST /v1/loops`); follow it with `events(id)`. */
  async startLoop(request: LoopRequest, options?: CallOptions): Promise<LoopCreated> {
    return (await this.#json("POST", "/v1/loops", request, options)) as LoopCreated;
  }

  /** A loop run as it stands: status, transcript, result (`GET /v1/loops/{id}`). */
  async getLoop(id: string, options?: CallOptions): Promise<LoopRun> {
    return (await this.#json("GET", `/v1/loops/${encodeURIComponent(id)}`, undefined, options)) as LoopRun;
  }

  /** A page of runs, newest first (`GET /v1/loops`); pass `next` as `cursor` for the following page. */
  async listLoops(query: ListLoopsQuery = {}, options?: CallOptions): Promise<LoopList> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null) q.set(k, String(v));
    }
    const qs = q.size > 0 ? `?${q}` : "";
    return (await this.#json("GET", `/v1/loops${qs}`, undefined, options)) as LoopList;
  }

  /** Cancels a running loop (`DELETE /v1/loops/{id}`); a finished one throws `ConflictError`. */
  async cancelLoop(id: string, options?: CallOptions): Promise<LoopCancelling> {
    return (await this.#json("DELETE", `/v1/loops/${encodeURIComponent(id)}`, undefined, options)) as LoopCancelling;
  }

  /** The configured models (`GET /v1/models`). */
  async models(options?: CallOptions): Promise<ModelList> {
    return (await this.#json("GET", "/v1/models", undefined, options)) as ModelList;
  }

  /** The tools loops can call, and their MCP servers (`GET /v1/tools`). */
  async tools(options?: CallOptions): Promise<ToolList> {
    return (await this.#json("GET", "/v1/tools", undefined, options)) as ToolList;
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
  async *events(id: string, options: EventsOptions = {}): AsyncGenerator<LoopEvent> {
    const signal = callSignal(options);
    const maxReconnects = options.maxReconnects ?? 6;
    const firstDelay = options.reconnectDelay ?? 100;
    let last = options.lastEventId;
    let failures = 0;
    let delay = firstDelay;
    let lastError: unknown;
    let wait = 0;
    const path = `/v1/loops/${encodeURIComponent(id)}/events`;
    for (;;) {
      signal?.throwIfAborted();
      let progressed = false;
      wait = 0;
      try {
        const headers: Record<string, string> = { accept: "text/event-stream" };
        if (last !== undefined) headers["last-event-id"] = String(last);
        const res = await this.#send("GET", path, undefined, { signal, headers: { ...options.headers, ...headers } });
        if (!res.ok) throw await errorFromResponse(res);
        if (!isEventStream(res) || res.body === null) {
          throw new ProblemError({ type: "about:blank", title: "Not an event stream", status: res.status });
        }
        for await (const m of readSSE(res.body)) {
          const n = m.id === undefined ? NaN : Number(m.id);
          if (!Number.isInteger(n)) continue;
          if (last !== undefined && n <= last) continue; // never twice
          const known = KNOWN_LOOP_EVENTS.has(m.event);
          const ev = known ? ({ id: n, event: m.event, data: parseData(m.data, m.event) } as LoopEvent) : undefined;
          last = n;
          progressed = true;
          failures = 0;
          delay = firstDelay;
          if (ev === undefined) continue;
          yield ev;
          if (ev.event === "loop.completed") return;
        }
        lastError = new Error("the event stream ended before loop.completed");
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        // The service said no, or sent what cannot be read: no retry helps.
        if (err instanceof StreamDataError) throw err;
        if (err instanceof ProblemError) {
          if (err.status < 500) throw err;
          wait = (err.retryAfter ?? 0) * 1000;
        }
        lastError = err;
      }
      if (!progressed) failures++;
      if (failures >= maxReconnects) {
        throw new Error(`events of ${id}: gave up after ${failures} reconnections without an event`, { cause: lastError });
      }
      await sleep(Math.max(delay, wait), signal);
      delay = Math.min(delay * 2, 5000);
    }
  }

  // ---------------------------------------------------------------- plumbing

  async #send(method: string, path: string, body: unknown, options: CallOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { accept: "application/json, application/problem+json", ...this.#headers };
    const apiKey = this.#apiKey ?? env("SAMPLED_API_KEY");
    if (apiKey !== undefined) headers["authorization"] = `Bearer ${apiKey}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    Object.assign(headers, options.headers);
    const init: RequestInit = { method, headers };
    if (body !== undefined) init.body = JSON.stringify(body);
    const signal = callSignal(options);
    if (signal) init.signal = signal;
    return (this.#fetch ?? globalThis.fetch)(this.baseUrl + path, init);
  }

  async #json(method: string, path: string, body: unknown, options?: CallOptions): Promise<unknown> {
    const res = await this.#send(method, path, body, options);
    if (!res.ok) throw await errorFromResponse(res);
    return res.json();
  }

  async *#stream<R>(route: Route, body: unknown, options: CallOptions = {}): AsyncGenerator<StreamEvent<R>> {
    const signal = callSignal(options);
    const res = await this.#send("POST", route, body, {
      signal,
      headers: { ...options.headers, accept: "text/event-stream" },
    });
    if (!res.ok) throw await errorFromResponse(res);
    if (!isEventStream(res) || res.body === null) {
      throw new ProblemError({ type: "about:blank", title: "Not an event stream", status: res.status });
    }
    const requestId = res.headers.get("x-request-id") ?? undefined;
    for await (const m of readSSE(res.body)) {
      switch (m.event) {
        case "delta":
        case "attempt":
          yield { event: m.event, data: parseData(m.data, m.event) } as StreamEvent<R>;
          break;
        case "result":
          yield { event: "result", data: parseData(m.data, m.event) as R };
          return;
        case "error":
          throw problemError(parseData(m.data, m.event) as Problem, { requestId });
        default:
        // an event this version does not know
      }
    }
    throw new Error(`${route}: the stream ended without a result`);
  }
}

const KNOWN_LOOP_EVENTS = new Set<string>([
  "loop.started",
  "model.delta",
  "model.completed",
  "tool.started",
  "tool.completed",
  "iteration.completed",
  "loop.completed",
]);

/** env reads a variable of Node's environment; undefined elsewhere, or when empty. */
function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const v = p?.env?.[name];
  return v === "" ? undefined : v;
}

/** StreamDataError: an event's data is not JSON. */
export class StreamDataError extends Error {}

function parseData(data: string, event: string): unknown {
  try {
    return JSON.parse(data);
  } catch (err) {
    throw new StreamDataError(`the data of a ${event} event is not JSON`, { cause: err });
  }
}

/** The request without `stream`: the JSON methods read one JSON answer. */
function withoutStream<T extends object>(request: T): T {
  const { stream: _stream, ...rest } = request as T & { stream?: unknown };
  return rest as T;
}

function isEventStream(res: Response): boolean {
  return (res.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream");
}

/** The signal of a call: its own, its timeout, both, or none. */
function callSignal(options: CallOptions): AbortSignal | undefined {
  const signals: AbortSignal[] = [];
  if (options.signal) signals.push(options.signal);
  if (options.timeout !== undefined) signals.push(AbortSignal.timeout(options.timeout));
  if (signals.length === 0) return undefined;
  if (signals.length === 1) return signals[0];
  return AbortSignal.any(signals);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
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
export async function toJSONSchema(schema: ZodSchemaLike<unknown> | JSONSchema): Promise<JSONSchema> {
  const s = schema as Record<string, unknown>;
  if (s !== null && typeof s === "object" && "_zod" in s) {
    if (typeof s["toJSONSchema"] === "function") {
      return (s["toJSONSchema"] as () => JSONSchema)();
    }
    const core = (await import("zod/v4/core" as string)) as { toJSONSchema: (s: unknown) => JSONSchema };
    return core.toJSONSchema(schema);
  }
  if (s !== null && typeof s === "object" && "_def" in s && "safeParse" in s) {
    throw new TypeError("a Zod 3 schema cannot be converted: use zod/v4 (z.object from 'zod' 4, or 'zod/v4' of zod 3.25)");
  }
  return schema as JSONSchema;
}

