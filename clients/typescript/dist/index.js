/**
 * @sampled/client: a client of sampled, MCP sampling as an HTTP service.
 *
 * ```ts
 * import { sampled } from "@sampled/client"; // SAMPLED_URL, SAMPLED_API_KEY
 * const result = await sampled.createMessage({ messages, maxTokens: 200 });
 * ```
 */
export { Sampled, StreamDataError, toJSONSchema, } from "./client.js";
export { BadRequestError, ConflictError, GoneError, NotFoundError, ProblemError, RateLimitError, SampleValidationError, UnauthorizedError, UpstreamError, } from "./errors.js";
export { readSSE } from "./sse.js";
import { Sampled } from "./client.js";
/** createClient is `new Sampled(options)`. */
export function createClient(options) {
    return new Sampled(options);
}
/**
 * sampled is a client configured by the environment: `SAMPLED_URL`
 * (default `http://127.0.0.1:8080`) and `SAMPLED_API_KEY`, read at each
 * request. `import { sampled } from "@sampled/client"` is all an MCP
 * server needs to call `sampled.createMessage(params)`.
 */
export const sampled = new Sampled();
