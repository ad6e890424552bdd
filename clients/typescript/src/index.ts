// Interlock's TypeScript client: the generated types of openapi.json (schema.d.ts, by
// openapi-typescript) behind a thin layer shaped like the Python client.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";
import { InterlockAPIError, errorFrom } from "./errors.js";
import { streamEvents, type StreamEvent } from "./sse.js";

export type Schemas = components["schemas"];
export type TurnResult = Schemas["TurnPublic"];
export type ChatState = Schemas["ChatPublic"];
export type InterruptData = Schemas["Interrupt"];
export type ResumeBody = Schemas["ResumeRequest"];
export { errorFrom, InterlockAPIError, type StreamEvent };
export * from "./errors.js";

export interface ClientOptions {
  apiKey?: string;
  fetch?: typeof globalThis.fetch;
}

type Answer<T> = { data?: T; error?: unknown; response: Response };

/** Entries of one resume: `interrupt.approve()`, `.reject(why)`, `.respond(x)`, ... */
export type Decision =
  | { kind: "respond"; entry: Schemas["RespondEntry"] }
  | { kind: "restart"; entry: Schemas["RestartEntry"] }
  | { kind: "approve"; entry: Schemas["ApproveEntry"] }
  | { kind: "edit"; entry: Schemas["EditEntry"] }
  | { kind: "reject"; entry: Schemas["RejectEntry"] };

/** A pending call, with builders for the decisions it can take (each echoes the input's hash,
 * so a decision on an input that changed meanwhile is refused with `stale_interrupt`). */
export class Interrupt {
  constructor(readonly data: InterruptData) {}
  get ref(): string { return this.data.ref; }
  get name(): string { return this.data.name; }
  get input(): unknown { return this.data.input; }
  respond(output: unknown): Decision {
    return { kind: "respond", entry: { ref: this.ref, name: this.name, output,
      input_sha256: this.data.input_sha256 } };
  }
  restart(replaceInput?: unknown): Decision {
    const entry: Schemas["RestartEntry"] = { ref: this.ref, name: this.name,
      input_sha256: this.data.input_sha256 };
    if (replaceInput !== undefined) entry.replace_input = replaceInput;
    return { kind: "restart", entry };
  }
  approve(): Decision {
    return { kind: "approve", entry: { ref: this.ref, name: this.name,
      input_sha256: this.data.input_sha256 } };
  }
  edit(input: unknown, reason: string): Decision {
    return { kind: "edit", entry: { ref: this.ref, name: this.name, input, reason,
      input_sha256: this.data.input_sha256 } };
  }
  reject(reason: string): Decision {
    return { kind: "reject", entry: { ref: this.ref, name: this.name, reason,
      input_sha256: this.data.input_sha256 } };
  }
}

export function interruptsOf(turn: { interrupts: InterruptData[] }): Interrupt[] {
  return turn.interrupts.map((i) => new Interrupt(i));
}

function resumeBody(decisions: Decision[]): ResumeBody {
  const lists: Record<Decision["kind"], unknown[]> = {
    respond: [], restart: [], approve: [], edit: [], reject: [] };
  for (const d of decisions) lists[d.kind].push(d.entry);
  return lists as ResumeBody;
}

/** A turn's JSON answer (the same routes answer SSE text when asked for a stream). */
async function turn(answer: Promise<TurnResult | string>): Promise<TurnResult> {
  const result = await answer;
  if (typeof result === "string") throw new TypeError("expected JSON, got a stream");
  return result;
}

export class Client {
  readonly http: ReturnType<typeof createClient<paths>>;
  private readonly headers: Record<string, string>;

  constructor(readonly baseUrl: string, private readonly options: ClientOptions = {}) {
    this.headers = options.apiKey ? { Authorization: `Bearer ${options.apiKey}` } : {};
    this.http = createClient<paths>({ baseUrl, headers: this.headers, fetch: options.fetch });
  }

  /** The answer's data, or the typed error of its code. */
  async unwrap<T>(answer: Promise<Answer<T>>): Promise<T> {
    const { data, error, response } = await answer;
    if (error !== undefined || !response.ok) throw errorFrom(response.status, error);
    return data as T;
  }

  async chat(agent: string, metadata?: Record<string, unknown>): Promise<Chat> {
    const created = await this.unwrap(this.http.POST("/v1/chats", { body: { agent, metadata } }));
    return new Chat(this, created.id, agent);
  }

  /** A chat started with its first message, in one request: the chat, and its state as
   * that message's turn left it (`interrupts` pending, `finish_reason`). Sent again under
   * the same `idempotencyKey`, it answers that chat as its first turn left it. */
  async start(agent: string, text: string,
              options: { metadata?: Record<string, unknown>; maxTurns?: number;
                         idempotencyKey?: string } = {},
  ): Promise<{ chat: Chat; state: ChatState }> {
    const body: Schemas["ChatCreate"] = { agent, text };
    if (options.metadata !== undefined) body.metadata = options.metadata;
    if (options.maxTurns !== undefined) body.max_turns = options.maxTurns;
    const params = options.idempotencyKey === undefined ? {}
      : { header: { "Idempotency-Key": options.idempotencyKey } };
    const state = await this.unwrap(this.http.POST("/v1/chats", { body, params }));
    return { chat: new Chat(this, state.id, agent), state };
  }

  openChat(chatId: string, agent = ""): Chat {
    return new Chat(this, chatId, agent);
  }

  async interrupts(query: Record<string, string | number> = {}): Promise<Schemas["InboxRow"][]> {
    const page = await this.unwrap(this.http.GET("/v1/interrupts", { params: { query } }));
    return page.items;
  }

  async decisions(query: Record<string, string | number> = {}): Promise<Schemas["DecisionRow"][]> {
    const page = await this.unwrap(this.http.GET("/v1/decisions", { params: { query } }));
    return page.items;
  }

  async agents(): Promise<Schemas["AgentPublic"][]> {
    return (await this.unwrap(this.http.GET("/v1/agents"))).items;
  }

  /** POST with `Accept: text/event-stream`; `lastEventId` rejoins a stream that dropped. */
  stream(path: string, body: unknown, lastEventId?: string,
         signal?: AbortSignal): AsyncGenerator<StreamEvent> {
    const fetcher = this.options.fetch ?? globalThis.fetch;
    const headers: Record<string, string> = { ...this.headers, "Content-Type": "application/json",
      Accept: "text/event-stream" };
    if (lastEventId !== undefined) headers["Last-Event-ID"] = lastEventId;
    return streamEvents(fetcher(new URL(path, this.baseUrl), {
      method: "POST", headers, body: JSON.stringify(body), signal }));
  }
}

export class Chat {
  constructor(readonly client: Client, readonly id: string, readonly agent: string) {}

  private get path() { return { params: { path: { chat_id: this.id } } }; }

  send(text: string, maxTurns?: number): Promise<TurnResult> {
    const body: Schemas["MessageCreate"] = { text };
    if (maxTurns !== undefined) body.max_turns = maxTurns;
    return turn(this.client.unwrap(this.client.http.POST("/v1/chats/{chat_id}/messages",
      { ...this.path, body })));
  }

  /** One resume of any mix of decisions, all or nothing. */
  decide(...decisions: Decision[]): Promise<TurnResult> {
    return turn(this.client.unwrap(this.client.http.POST("/v1/chats/{chat_id}/resume",
      { ...this.path, body: resumeBody(decisions) })));
  }

  withdraw(refs: string[], reason: string): Promise<TurnResult> {
    return turn(this.client.unwrap(this.client.http.POST("/v1/chats/{chat_id}/withdraw",
      { ...this.path, body: { refs, reason } })));
  }

  retry(): Promise<TurnResult> {
    return turn(this.client.unwrap(this.client.http.POST("/v1/chats/{chat_id}/retry",
      this.path)));
  }

  state(version?: number): Promise<ChatState> {
    const query = version === undefined ? {} : { version };
    return this.client.unwrap(this.client.http.GET("/v1/chats/{chat_id}",
      { params: { path: { chat_id: this.id }, query } }));
  }

  /** The turn's events as they happen (text, tool_request, interrupt, turn_end, ...). */
  streamSend(text: string, signal?: AbortSignal): AsyncGenerator<StreamEvent> {
    return this.client.stream(`/v1/chats/${this.id}/messages`, { text }, undefined, signal);
  }

  streamDecide(decisions: Decision[], signal?: AbortSignal): AsyncGenerator<StreamEvent> {
    return this.client.stream(`/v1/chats/${this.id}/resume`, resumeBody(decisions), undefined,
      signal);
  }

  /** After a dropped connection: the events after `lastEventId`, never the command again. */
  rejoin(kind: "messages" | "resume", lastEventId: string): AsyncGenerator<StreamEvent> {
    const body = kind === "messages" ? { text: "-" } : {};
    return this.client.stream(`/v1/chats/${this.id}/${kind}`, body, lastEventId);
  }
}
