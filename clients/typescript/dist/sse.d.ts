/** One Server-Sent Event, as the stream carried it. */
export interface SSEMessage {
    /** The `event:` field; "message" when the event had none. */
    event: string;
    /** The `data:` lines, joined by newlines. */
    data: string;
    /** The `id:` field, when the event had one. */
    id: string | undefined;
}
/**
 * readSSE yields the events of an SSE body as the WHATWG rules dispatch
 * them: an event is yielded only at the blank line that ends it, so one
 * cut by a dropped connection is never yielded. Comments (`: heartbeat`)
 * are skipped. Leaving the loop early cancels the body.
 */
export declare function readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEMessage>;
