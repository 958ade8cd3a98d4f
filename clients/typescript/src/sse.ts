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
export async function* readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  let sawData = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      for (;;) {
        const nl = buf.search(/\r\n|\r|\n/);
        if (nl < 0) break;
        // A lone \r at the end of the buffer may be the start of \r\n.
        if (buf[nl] === "\r" && nl === buf.length - 1) break;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (sawData) {
            yield { event: event || "message", data: data.join("\n"), id };
          }
          event = "";
          data = [];
          sawData = false;
          id = undefined;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        switch (field) {
          case "event":
            event = val;
            break;
          case "data":
            data.push(val);
            sawData = true;
            break;
          case "id":
            if (!val.includes("\0")) id = val;
            break;
          default:
          // retry and unknown fields: nothing to do
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
