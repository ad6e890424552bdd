// Server-Sent Events from a fetch Response: frames in, events out; an `error` event throws
// the typed error it carries. `id` is what `Last-Event-ID` takes to rejoin the stream.
import { errorFrom } from "./errors.js";

export interface StreamEvent {
  type: string;
  id?: string;
  data: Record<string, unknown>;
}

export async function* streamEvents(answer: Promise<Response>): AsyncGenerator<StreamEvent> {
  const response = await answer;
  if (!response.ok || response.body === null) {
    throw errorFrom(response.status, await response.json().catch(() => null));
  }
  const decoder = new TextDecoder();
  let buffer = "";
  let event: { type: string; id?: string; data: string[] } = { type: "message", data: [] };
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).replace(/\r$/, "");
      buffer = buffer.slice(end + 1);
      if (line !== "") {
        if (line.startsWith(":")) continue;  // a keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event.type = value;
        else if (field === "id") event.id = value;
        else if (field === "data") event.data.push(value);
        continue;
      }
      if (event.data.length > 0) {
        const parsed = { type: event.type, id: event.id,
          data: JSON.parse(event.data.join("\n")) as Record<string, unknown> };
        if (parsed.type === "error") throw errorFrom(response.status, { error: parsed.data });
        yield parsed;
      }
      event = { type: "message", data: [] };
    }
  }
}
