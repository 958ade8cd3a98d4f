import type { components } from "./openapi.js";
type Schemas = components["schemas"];
/** An RFC 9457 problem document as sampled sends it. */
export type Problem = Schemas["Problem"];
/** One error of a problem, at the JSON Pointer `path` of the body (or of the answer). */
export type FieldError = Schemas["FieldError"];
/** The result a guaranteed helper gave up on. */
export type SampleResult = Schemas["SampleResult"];
/**
 * ProblemError is thrown for every answer that is not a success: sampled's
 * problem document (`application/problem+json`) with its status, or one
 * made up from a body that is not a problem (a proxy's page, say).
 * Subclasses name the statuses a caller handles apart.
 */
export declare class ProblemError extends Error {
    /** The HTTP status. */
    readonly status: number;
    /** The problem's type URI, `https://sampled.dev/problems/…`. */
    readonly type: string;
    readonly title: string;
    readonly detail: string | undefined;
    /** The request's path. */
    readonly instance: string | undefined;
    /** What was wrong, by JSON Pointer path; empty when the problem names none. */
    readonly errors: FieldError[];
    /** Seconds to wait before trying again, from `Retry-After`, when the answer had one. */
    readonly retryAfter: number | undefined;
    /** The `X-Request-ID` of the answer: the service's log has the request under it. */
    readonly requestId: string | undefined;
    /** The whole problem document, extension members included. */
    readonly problem: Problem;
    constructor(problem: Problem, init?: {
        retryAfter?: number | undefined;
        requestId?: string | undefined;
    });
}
/** 400: the body is not valid; `errors` names each offending path (`/messages/0/content/text`). */
export declare class BadRequestError extends ProblemError {
    /** JSON-RPC's invalid-params code (-32602) on `/v1/messages` problems. */
    get code(): number | undefined;
}
/** 401: no API key, or not one the service knows. */
export declare class UnauthorizedError extends ProblemError {
}
/** 404: no such loop (unknown, expired, or another key's), or no such route. */
export declare class NotFoundError extends ProblemError {
}
/** 409: the loop has already finished, so it cannot be cancelled. */
export declare class ConflictError extends ProblemError {
}
/** 410: the loop's events after the given id are no longer kept. */
export declare class GoneError extends ProblemError {
}
/**
 * 422: no valid answer within the allowed attempts. `method` is the call
 * that gave up (`sampleSchema`, `sampleTools`, or `sample` for a tools-mode
 * answer of `sample` or `createMessage`), `lastResult` the last answer and
 * `errors` what was wrong with it.
 */
export declare class SampleValidationError extends ProblemError {
    readonly method: "sampleSchema" | "sampleTools" | "sample";
    readonly attempts: number;
    readonly lastResult: SampleResult;
    constructor(problem: Problem, init?: {
        retryAfter?: number | undefined;
        requestId?: string | undefined;
    });
}
/**
 * 429: a limit was reached. `limit` says which (`requests`, `loops` or
 * `in_flight`); `retryAfter` says how many seconds to wait.
 */
export declare class RateLimitError extends ProblemError {
    get limit(): "requests" | "loops" | "in_flight" | undefined;
}
/** 502, 503, 504: the upstream provider failed, was unavailable or timed out (or the service is not ready). */
export declare class UpstreamError extends ProblemError {
}
/** problemError makes the typed error of a problem document. */
export declare function problemError(problem: Problem, init?: {
    retryAfter?: number | undefined;
    requestId?: string | undefined;
}): ProblemError;
/** retryAfterSeconds reads `Retry-After` (seconds, or an HTTP date). */
export declare function retryAfterSeconds(value: string | null): number | undefined;
/** errorFromResponse reads a failed answer into its typed error. */
export declare function errorFromResponse(res: Response): Promise<ProblemError>;
export {};
