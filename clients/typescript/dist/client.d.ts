import type { CreateMessageRequest, CreateMessageRequestParamsBase, CreateMessageRequestParamsWithTools, CreateMessageResult, CreateMessageResultWithTools } from "@modelcontextprotocol/sdk/types.js";
import type { components, operations } from "./openapi.js";
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
export type StreamEvent<R = SampleResult> = {
    event: "delta";
    data: Schemas["SampleDelta"];
} | {
    event: "attempt";
    data: Schemas["SampleAttempt"];
} | {
    event: "result";
    data: R;
};
/** The request body of a guaranteed schema answer, without the schema, which is given apart. */
export type SampleSchemaRequest = Omit<SampleRequest, "schema" | "tools" | "toolChoice" | "stream">;
/**
 * A Zod 4 schema, seen structurally: the client imports no zod. Its
 * output type is what `sampleSchema` returns in `parsed`.
 */
export interface ZodSchemaLike<T> {
    readonly _zod: {
        readonly output: T;
    };
}
/** The answer of `sampleSchema`: `parsed` validates against the schema. */
export type SampleSchemaResult<T> = Omit<SampleResult, "parsed" | "parseError" | "toolCalls"> & {
    parsed: T;
};
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
/**
 * Sampled is a client of sampled's HTTP API. Every method takes an
 * optional `CallOptions` with an `AbortSignal`; failures are thrown as
 * `ProblemError`s (`SampleValidationError`, `RateLimitError`, …).
 */
export declare class Sampled {
    #private;
    /**
     * A client of the service at `options.baseUrl`. What the options leave
     * out is read from the environment (Node's `process.env`) at each
     * request: `SAMPLED_URL`, `SAMPLED_API_KEY`.
     */
    constructor(options?: ClientOptions);
    /** The service's URL, without a trailing slash. */
    get baseUrl(): string;
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
    createMessage(params: CreateMessageRequest["params"], options?: CallOptions): Promise<CreateMessageResult | CreateMessageResultWithTools>;
    /** One sampling request (`POST /v1/sample`): plain, schema (`parsed`/`parseError`) or tools mode (`toolCalls`). */
    sample(request: SampleRequest, options?: CallOptions): Promise<SampleResult>;
    /**
     * A value that validates against `schema` (`POST /v1/sample/schema`):
     * the service retries with corrective feedback and throws
     * `SampleValidationError` when the attempts run out. `schema` is a JSON
     * Schema or a Zod 4 schema (converted with Zod's own `toJSONSchema`);
     * `parsed` is typed by the Zod schema, or by `T`.
     */
    sampleSchema<T = unknown>(schema: ZodSchemaLike<T> | JSONSchema, request: SampleSchemaRequest, options?: CallOptions): Promise<SampleSchemaResult<T>>;
    /**
     * At least one valid tool call (`POST /v1/sample/tools`): every call
     * names a declared tool and its arguments validate against the tool's
     * `inputSchema`; `SampleValidationError` when the attempts run out.
     */
    sampleTools(request: SampleToolsRequest, options?: CallOptions): Promise<SampleToolsResult>;
    /** `sample`, streamed: the deltas as they come, then the result. */
    streamSample(request: SampleRequest, options?: CallOptions): AsyncGenerator<StreamEvent<SampleResult>>;
    /** `sampleSchema`, streamed: each attempt's deltas, `attempt` events between them, then the result. */
    streamSampleSchema<T = unknown>(schema: ZodSchemaLike<T> | JSONSchema, request: SampleSchemaRequest, options?: CallOptions): AsyncGenerator<StreamEvent<SampleSchemaResult<T>>>;
    /** `sampleTools`, streamed. */
    streamSampleTools(request: SampleToolsRequest, options?: CallOptions): AsyncGenerator<StreamEvent<SampleToolsResult>>;
    /** `createMessage`, streamed: the deltas, then the MCP result. */
    streamMessage(params: CreateMessageRequest["params"], options?: CallOptions): AsyncGenerator<StreamEvent<CreateMessageResult | CreateMessageResultWithTools>>;
    /** Starts a tool loop (`POST /v1/loops`); follow it with `events(id)`. */
    startLoop(request: LoopRequest, options?: CallOptions): Promise<LoopCreated>;
    /** A loop run as it stands: status, transcript, result (`GET /v1/loops/{id}`). */
    getLoop(id: string, options?: CallOptions): Promise<LoopRun>;
    /** A page of runs, newest first (`GET /v1/loops`); pass `next` as `cursor` for the following page. */
    listLoops(query?: ListLoopsQuery, options?: CallOptions): Promise<LoopList>;
    /** Cancels a running loop (`DELETE /v1/loops/{id}`); a finished one throws `ConflictError`. */
    cancelLoop(id: string, options?: CallOptions): Promise<LoopCancelling>;
    /** The configured models (`GET /v1/models`). */
    models(options?: CallOptions): Promise<ModelList>;
    /** The tools loops can call, and their MCP servers (`GET /v1/tools`). */
    tools(options?: CallOptions): Promise<ToolList>;
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
    events(id: string, options?: EventsOptions): AsyncGenerator<LoopEvent>;
}
/** StreamDataError: an event's data is not JSON. */
export declare class StreamDataError extends Error {
}
/**
 * toJSONSchema gives the JSON Schema of a schema argument: a JSON Schema
 * as it is; a Zod 4 schema through Zod's own conversion, the schema's
 * `toJSONSchema()` method, or for schemas without it (`zod/mini`) the
 * `toJSONSchema` function of `zod/v4/core`, imported only then. A Zod 3
 * schema has no JSON Schema conversion of Zod's own and is refused.
 */
export declare function toJSONSchema(schema: ZodSchemaLike<unknown> | JSONSchema): Promise<JSONSchema>;
export {};
