/**
 * @sampled/client: a client of sampled, MCP sampling as an HTTP service.
 *
 * ```ts
 * import { Sampled } from "@sampled/client";
 * const sampled = new Sampled({ baseUrl: "http://127.0.0.1:8080" });
 * const result = await sampled.createMessage({ messages, maxTokens: 200 });
 * ```
 */
export { Sampled, toJSONSchema, } from "./client.js";
export { BadRequestError, ConflictError, GoneError, NotFoundError, ProblemError, RateLimitError, SampleValidationError, UnauthorizedError, UpstreamError, } from "./errors.js";
export { readSSE } from "./sse.js";
import { Sampled } from "./client.js";
/** createClient is `new Sampled(options)`. */
export function createClient(options) {
    return new Sampled(options);
}
