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
export class ProblemError extends Error {
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

  constructor(problem: Problem, init: { retryAfter?: number | undefined; requestId?: string | undefined } = {}) {
    super(problem.detail ?? problem.title ?? `status ${problem.status}`);
    this.name = new.target.name;
    this.problem = problem;
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
    this.detail = problem.detail;
    this.instance = problem.instance;
    this.errors = Array.isArray(problem.errors) ? problem.errors : [];
    this.retryAfter = init.retryAfter;
    this.requestId = init.requestId;
  }
}

/** 400: the body is not valid; `errors` names each offending path (`/messages/0/content/text`). */
export class BadRequestError extends ProblemError {
  /** JSON-RPC's invalid-params code (-32602) on `/v1/messages` problems. */
  get code(): number | undefined {
    const c = this.problem["code"];
    return typeof c === "number" ? c : undefined;
  }
}

/** 401: no API key, or not one the service knows. */
export class UnauthorizedError extends ProblemError {}

/** 404: no such loop (unknown, expired, or another key's), or no such route. */
export class NotFoundError extends ProblemError {}

/** 409: the loop has already finished, so it cannot be cancelled. */
export class ConflictError extends ProblemError {}

/** 410: the loop's events after the given id are no longer kept. */
export class GoneError extends ProblemError {}

/**
 * 422: no valid answer within the allowed attempts. `method` is the call
 * that gave up (`sampleSchema`, `sampleTools`, or `sample` for a tools-mode
 * answer of `sample` or `createMessage`), `lastResult` the last answer and
 * `errors` what was wrong with it.
 */
export class SampleValidationError extends ProblemError {
  readonly method: "sampleSchema" | "sampleTools" | "sample";
  readonly attempts: number;
  readonly lastResult: SampleResult;

  constructor(problem: Problem, init: { retryAfter?: number | undefined; requestId?: string | undefined } = {}) {
    super(problem, init);
    const p = problem as Schemas["SampleValidationProblem"];
    this.method = p.method;
    this.attempts = p.attempts;
    this.lastResult = p.lastResult;
  }
}

/**
 * 429: a limit was reached. `limit` says which (`requests`, `loops` or
 * `in_flight`); `retryAfter` says how many seconds to wait.
 */
export class RateLimitError extends ProblemError {
  get limit(): "requests" | "loops" | "in_flight" | undefined {
    const l = this.problem["limit"];
    return l === "requests" || l === "loops" || l === "in_flight" ? l : undefined;
  }
}

/** 502, 503, 504: the upstream provider failed, was unavailable or timed out (or the service is not ready). */
export class UpstreamError extends ProblemError {}

/** The error class of a status. */
function classOf(status: number): typeof ProblemError {
  switch (status) {
    case 400:
      return BadRequestError;
    case 401:
      return UnauthorizedError;
    case 404:
      return NotFoundError;
    case 409:
      return ConflictError;
    case 410:
      return GoneError;
    case 422:
      return SampleValidationError;
    case 429:
      return RateLimitError;
    case 502:
    case 503:
    case 504:
      return UpstreamError;
    default:
      return ProblemError;
  }
}

/** problemError makes the typed error of a problem document. */
export function problemError(problem: Problem, init: { retryAfter?: number | undefined; requestId?: string | undefined } = {}): ProblemError {
  const C = classOf(problem.status);
  // A 422 that is not the validation problem (none is documented) stays generic.
  if (C === SampleValidationError && !("lastResult" in problem)) {
    return new ProblemError(problem, init);
  }
  return new C(problem, init);
}

/** retryAfterSeconds reads `Retry-After` (seconds, or an HTTP date). */
export function retryAfterSeconds(value: string | null): number | undefined {
  if (value == null || value.trim() === "") return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** errorFromResponse reads a failed answer into its typed error. */
export async function errorFromResponse(res: Response): Promise<ProblemError> {
  const init = {
    retryAfter: retryAfterSeconds(res.headers.get("retry-after")),
    requestId: res.headers.get("x-request-id") ?? undefined,
  };
  const text = await res.text().catch(() => "");
  let problem: Problem | undefined;
  try {
    const v: unknown = JSON.parse(text);
    if (v !== null && typeof v === "object" && typeof (v as { status?: unknown }).status === "number") {
      problem = v as Problem;
    }
  } catch {
    // not JSON: made up below
  }
  problem ??= {
    type: "about:blank",
    title: res.statusText || `HTTP ${res.status}`,
    status: res.status,
    detail: text.slice(0, 500) || undefined,
  };
  return problemError(problem, init);
}
