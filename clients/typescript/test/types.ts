// Compiled by TestTypesCheck (tsc --noEmit), never run: the client's
// types as a TypeScript caller meets them, through the package's exports.
import type {
  CreateMessageRequest,
  CreateMessageResult,
  CreateMessageResultWithTools,
} from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";

import { RateLimitError, Sampled, SampleValidationError, type LoopEvent } from "@sampled/client";

declare const sampled: Sampled;
declare const params: CreateMessageRequest["params"];

export async function uses(signal: AbortSignal): Promise<void> {
  // The MCP SDK's params in, its result types out, as Server.createMessage.
  const plain: CreateMessageResult = await sampled.createMessage(
    { messages: [{ role: "user", content: { type: "text", text: "hi" } }], maxTokens: 10 },
    { signal },
  );
  const withTools: CreateMessageResultWithTools = await sampled.createMessage({
    messages: [{ role: "user", content: { type: "text", text: "hi" } }],
    maxTokens: 10,
    tools: [{ name: "t", inputSchema: { type: "object" } }],
  });
  const either: CreateMessageResult | CreateMessageResultWithTools = await sampled.createMessage(params);
  void plain, withTools, either;

  // A Zod schema types parsed.
  const Person = z.object({ name: z.string(), age: z.number() });
  const p = await sampled.sampleSchema(Person, { prompt: "a person" });
  const name: string = p.parsed.name;
  const age: number = p.parsed.age;
  // @ts-expect-error: Person has no city
  p.parsed.city;
  void name, age;

  // A JSON Schema with the value's type given.
  const q = await sampled.sampleSchema<{ city: string }>({ type: "object" }, { prompt: "a city" });
  const city: string = q.parsed.city;
  void city;

  // A JSON Schema alone: parsed is unknown until checked.
  const r = await sampled.sampleSchema({ type: "object" }, { prompt: "x" });
  // @ts-expect-error: parsed is unknown
  r.parsed.anything;

  // @ts-expect-error: sampleTools needs tools
  await sampled.sampleTools({ prompt: "x" });

  // Loop events are told apart by their name.
  for await (const e of sampled.events("loop_x", { signal })) {
    const ev: LoopEvent = e;
    if (ev.event === "loop.completed") {
      const status: string = ev.data.status;
      void status;
    }
    if (ev.event === "tool.completed") {
      const isError: boolean = ev.data.isError;
      void isError;
    }
  }

  try {
    await sampled.sample({ prompt: "x" });
  } catch (err) {
    if (err instanceof SampleValidationError) {
      const n: number = err.attempts;
      const text: string = err.lastResult.text;
      void n, text;
    }
    if (err instanceof RateLimitError) {
      const after: number | undefined = err.retryAfter;
      void after;
    }
  }
}
