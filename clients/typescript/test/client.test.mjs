// Runs against a live Interlock (tests/clients/test_typescript.py starts one and sets
// INTERLOCK_URL): the API keys and agents are those of tests/api.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  Client, ConflictError, NotFoundError, UnauthenticatedError, interruptsOf,
} from "../dist/index.js";

const URL = process.env.INTERLOCK_URL;
const as = (who) => new Client(URL, { apiKey: `key-${who}` });

test("a whole approval cycle: asked, approved by two treasurers, paid", async () => {
  const chat = await as("alice").chat("payAgent");
  const asked = await chat.send("pay 500 bob-corp");
  assert.equal(asked.finish_reason, "interrupted");
  const [held] = interruptsOf(asked);
  assert.equal(held.name, "pay");
  assert.equal(held.data.approval.terms.quorum, 2);
  const first = await as("tina").openChat(chat.id).decide(held.approve());
  assert.equal(first.finish_reason, "interrupted");
  const done = await as("tom").openChat(chat.id).decide(held.approve());
  assert.equal(done.text, "outcome: {'paid': 500, 'to': 'bob-corp'}");
  const log = await as("carol").decisions({ chat_id: chat.id });
  // newest first
  assert.deepEqual(log.map((d) => [d.kind, d.actor]), [["approve", "tom"], ["approve", "tina"]]);
});

test("a chat started with its message pauses in one request, and goes on", async () => {
  const { chat, state } = await as("dana").start("bankingAgent", "Transfer $500 to savings.");
  assert.equal(state.id, chat.id);
  assert.equal(state.finish_reason, "interrupted");
  assert.deepEqual(state.messages.map((m) => m.role), ["user", "model"]);
  const [asked] = interruptsOf(state);
  assert.equal(asked.name, "userApproval");
  const done = await chat.decide(asked.respond({ approved: true }));
  assert.equal(done.finish_reason, "stop");
  await assert.rejects(as("dana").start("bankingAgent", ""),
    (err) => err.status === 422 && err.code === "invalid_request");
  const key = `k-${Date.now()}`;
  const once = await as("dana").start("bankingAgent", "Transfer $5 to savings.",
    { idempotencyKey: key });
  const twice = await as("dana").start("bankingAgent", "Transfer $5 to savings.",
    { idempotencyKey: key });
  assert.equal(twice.chat.id, once.chat.id, "sent again under its key: the same chat");
  assert.deepEqual(twice.state, once.state);
});

test("errors are typed by their code", async () => {
  const chat = await as("dana").chat("bankingAgent");
  const [asked] = interruptsOf(await chat.send("Transfer $500 to savings."));
  await chat.decide(asked.respond({ approved: true }));
  await assert.rejects(chat.decide(asked.respond({ approved: true })), (err) => {
    assert.ok(err instanceof ConflictError);
    assert.equal(err.code, "interrupt_not_pending");
    assert.equal(err.details.decided_by, "dana");
    return true;
  });
  await assert.rejects(as("eve").openChat(chat.id).state(),
    (err) => err instanceof NotFoundError && err.code === "chat_not_found");
  await assert.rejects(as("nobody").agents(),
    (err) => err instanceof UnauthenticatedError && err.status === 401);
});

test("a stream that drops is rejoined with Last-Event-ID and loses nothing", async () => {
  const chat = await as("dana").chat("bankingAgent");
  const dropped = new AbortController();
  const seen = [];
  for await (const event of chat.streamSend("Transfer $70 to savings.", dropped.signal)) {
    seen.push(event);
    break;  // the connection drops after the first event
  }
  dropped.abort();
  assert.ok(seen[0].id, "every event carries an id to rejoin from");
  for await (const event of chat.rejoin("messages", seen[0].id)) seen.push(event);
  const kinds = seen.map((e) => e.type);
  assert.equal(kinds.at(-1), "turn_end");
  assert.ok(kinds.includes("interrupt"));
  assert.equal(new Set(seen.map((e) => e.id)).size, seen.length, "no event twice");
  const state = await chat.state();
  assert.equal(state.status, "interrupted");
  assert.equal(state.interrupts.length, 1);
});
