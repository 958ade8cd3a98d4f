/**
 * @sampled/client: a client of sampled, MCP sampling as an HTTP service.
 *
 * ```ts
 * import { sampled } from "@sampled/client"; // SAMPLED_URL, SAMPLED_API_KEY
 * const result = await sampled.createMessage({ messages, maxTokens: 200 });
 * ```
 */
export {
  Sampled,
  StreamDataError,
  toJSONSchema,
  type CallOptions,
  type ClientOptions,
  type EventsOptions,
  type JSONSchema,
  type ListLoopsQuery,
  type LoopCancelling,
  type LoopCreated,
  type LoopEvent,
  type LoopList,
  type LoopRequest,
  type LoopRun,
  type LoopStatus,
  type LoopSummary,
  type ModelList,
  type SampleRequest,
  type SampleResult,
  type SampleSchemaRequest,
  type SampleSchemaResult,
  type SampleToolsRequest,
  type SampleToolsResult,
  type StreamEvent,
  type ToolList,
  type ZodSchemaLike,
} from "./client.js";
export {
  BadRequestError,
  ConflictError,
  GoneError,
  NotFoundError,
  ProblemError,
  RateLimitError,
  SampleValidationError,
  UnauthorizedError,
  UpstreamError,
  type FieldError,
  type Problem,
} from "./errors.js";
export type { components, operations, paths } from "./openapi.js";
export { readSSE, type SSEMessage } from "./sse.js";

import { Sampled, type ClientOptions } from "./client.js";

/** createClient is `new Sampled(options)`. */
export function createClient(options?: ClientOptions): Sampled {
  return new Sampled(options);
}

/**
 * sampled is a client configured by the environment: `SAMPLED_URL`
 * (default `http://127.0.0.1:8080`) and `SAMPLED_API_KEY`, read at each
 * request. `import { sampled } from "@sampled/client"` is all an MCP
 * server needs to call `sampled.createMessage(params)`.
 */
export const sampled: Sampled = new Sampled();
