// Shared by the suites: the client of the service the Go test started
// (BASE_URL, API_KEY), and request pieces.
import { Sampled } from "@sampled/client";

export const baseUrl = mustEnv("BASE_URL");
export const apiKey = mustEnv("API_KEY");
export const sampled = new Sampled({ baseUrl, apiKey });

export const person = {
  type: "object",
  properties: { name: { type: "string" } },
  required: ["name"],
};

export const weather = {
  name: "get_weather",
  description: "Get current weather for a city",
  inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

export const user = (text) => [{ role: "user", content: { type: "text", text } }];

function mustEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these suites through go test ./clients/typescript/`);
  return v;
}

// collect reads a stream to its end.
export async function collect(stream) {
  const events = [];
  for await (const e of stream) events.push(e);
  return events;
}
