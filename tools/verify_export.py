#!/usr/bin/env python3
"""Check an Interlock export against the checkpoint public key, without Interlock.

Needs Python 3.11+ and the `cryptography` package (for Ed25519) only. The formats are
those of docs/audit.md; this script is their reference implementation for outsiders.

    python tools/verify_export.py --public-key cp.pub export.jsonl
        [--manifest export.jsonl.manifest.json] [--checkpoints checkpoints.jsonl]
        [--secrets-file secrets.txt]

An evidence pack (a zip from `interlock audit evidence`) is checked whole: its manifest's
signature, each file's SHA-256, the checkpoint's signature, every stream's chain, that each
stream ends at the head the checkpoint lists (its Merkle audit path leads to the signed
root), that each item's decision is in the pack, and that the findings and sign-off are
what the review's own events say. With `--population FILE` (JSON Lines of {"chat_id",
"version", "strata"}: the query's answer when the sample was drawn), it draws the sample
again from the recorded seed by the recorded method (`sha256-v1` or `mix64-v2`, see
docs/review.md) and checks that it is the pack's items, and the recorded sizes.

It checks: the manifest's signature and the export's SHA-256; the signature, Merkle root
and sequence of the checkpoint(s); for an events export, every chat's chain (format 2
hashes; seals and format 1 chains too when given the HMAC secrets, one per line), the
`input_sha256` of every decision, and that the export holds each chat the checkpoint
lists up to the version it lists, with the same link. For both, the keys the checkpoint
names (`keys`): no event names a retired key past its retirement time, nor any key but the
active one past its chat's head in the rotation checkpoint (which the manifest carries,
with its signature). Exit 0 when all hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import math
import re
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

CHAIN_V2 = re.compile(r"2:([A-Za-z0-9_-]{1,32}):([0-9a-f]{64}):([0-9a-f]{64})")
TOPIC = re.compile(r"[A-Za-z0-9_.:]{1,200}")
TAIL = ',"chain":"'
ENCRYPTED = object()


# -- RFC 8785 (JCS) --------------------------------------------------------------------------


def jcs(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        return str(value) if abs(value) <= 2**53 else _number(float(value))
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    keys = sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    return "{" + ",".join(f"{jcs(k)}:{jcs(value[k])}" for k in keys) + "}"


def _number(x: float) -> str:
    if not math.isfinite(x):
        raise ValueError("NaN and infinities are not JSON")
    if x == 0:
        return "0"
    sign, x = ("-", -x) if x < 0 else ("", x)
    mantissa, _, exp = repr(x).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    n = len(whole) + int(exp or 0) - (len(whole + frac) - len(digits))
    s = digits.rstrip("0")
    k = len(s)
    if k <= n <= 21:
        return sign + s + "0" * (n - k)
    if 0 < n <= 21:
        return sign + s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + s
    e = n - 1
    return sign + (s if k == 1 else s[0] + "." + s[1:]) + f"e{'+' if e >= 0 else '-'}{abs(e)}"


def sha256_v2(value: Any) -> str:
    return hashlib.sha256(jcs(value).encode()).hexdigest()


def sha256_v1(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


# -- signatures, checkpoints ----------------------------------------------------------------


class Key:
    def __init__(self, text: str) -> None:
        if "PRIVATE KEY" in text:  # the PEM `interlock audit keygen --private` wrote
            raise ValueError("--public-key names a private key: give the public one (64 hex "
                             "digits, `interlock audit keygen --public`); keep this file secret")
        try:
            raw = bytes.fromhex(text.strip())
        except ValueError:
            raise ValueError("--public-key: not a public key (64 hex digits)") from None
        self.key = Ed25519PublicKey.from_public_bytes(raw)
        self.id = "e" + hashlib.sha256(raw).hexdigest()[:12]

    def check(self, message: bytes, signature_hex: str) -> bool:
        try:
            self.key.verify(bytes.fromhex(signature_hex), message)
        except (InvalidSignature, ValueError):
            return False
        return True


def merkle_root(leaves: list[bytes]) -> bytes:
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + merkle_root(leaves[:split])
                          + merkle_root(leaves[split:])).digest()


def leaf(chat_id: str, version: int, link: str) -> bytes:
    return hashlib.sha256(b"\x00" + f"{chat_id}\n{version}\n{link}".encode()).digest()


def check_checkpoint(cp: dict[str, Any], key: Key) -> str | None:
    s = cp["statement"]
    if s.get("format") != "interlock-checkpoint-1" or s.get("key_id") != key.id:
        return f"checkpoint {s.get('seq')}: not signed by key {key.id}"
    if not key.check(jcs(s).encode(), cp["signature"]):
        return f"checkpoint {s.get('seq')}: signature does not verify"
    root = merkle_root([leaf(c, v, link) for c, v, link in cp["heads"]]).hex()
    if root != s.get("root") or s.get("chats") != len(cp["heads"]):
        return f"checkpoint {s.get('seq')}: heads do not match the signed root"
    return None


def check_sequence(checkpoints: list[dict[str, Any]], key: Key) -> str | None:
    prev_seq, prev_digest = 0, ""
    for cp in checkpoints:
        problem = check_checkpoint(cp, key)
        if problem:
            return problem
        s = cp["statement"]
        if (s["seq"], s["prev"]) != (prev_seq + 1, prev_digest):
            return f"checkpoint {s['seq']}: does not follow checkpoint {prev_seq}"
        prev_seq, prev_digest = s["seq"], hashlib.sha256(jcs(s).encode()).hexdigest()
    return None


# -- chains ---------------------------------------------------------------------------------


class Chat:
    """One chat's chain as the export shows it."""

    def __init__(self, secrets: list[bytes]) -> None:
        self.secrets, self.version, self.link, self.format = secrets, 0, "", 1
        self.links: dict[int, str] = {}
        self.inputs: dict[str, Any] = {}

    def add(self, row: dict[str, Any]) -> str | None:
        version, topic, state = row["version"], row["topic"], row["state"]
        if version != self.version + 1:
            return f"version {self.version + 1} missing"
        at = state.rfind(TAIL)
        chain = state[at + len(TAIL):-2] if at >= 0 and state.endswith('"}') else ""
        if CHAIN_V2.fullmatch(chain):
            problem = self._v2(row["chat_id"], version, topic, state[:at] + "}", chain)
            self.format = 2
        elif self.format == 2:
            problem = "format 1 event after format 2"
        else:
            problem, chain = self._v1(row["chat_id"], version, state)
        if problem is None:
            problem = self._inputs(json.loads(state), topic)
        if problem is None:
            self.version = version
            self.links[version] = self.link
        return problem

    def _v2(self, chat_id: str, version: int, topic: str, body: str, chain: str) -> str | None:
        match = CHAIN_V2.fullmatch(chain)
        assert match is not None
        _, digest, seal = match.groups()
        if TOPIC.fullmatch(topic) is None:
            return "malformed topic"
        head = f"interlock-chain-v2\n{self.link}\n{chat_id}\n{version}\n{topic}\n"
        if hashlib.sha256((head + body).encode()).hexdigest() != digest:
            return "chain does not match the event"
        message = b"interlock-seal-v2\n" + digest.encode()
        if self.secrets and not any(
                hmac.compare_digest(hmac.new(k, message, "sha256").hexdigest(), seal)
                for k in self.secrets):
            return "seal does not match any given secret"
        self.link = digest
        return None

    def _v1(self, chat_id: str, version: int, state: str) -> tuple[str | None, str]:
        if not self.secrets:
            return "format 1 events need --secrets-file", ""
        data = json.loads(state)
        chain = data.pop("chain", None)
        data.pop("class_version", None)
        if (data.get("originator_id"), data.get("originator_version")) != (chat_id, version):
            return "the event's JSON names another chat or version", ""
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        message = f"{self.link}\n{text}".encode()
        if not any(hmac.new(k, message, "sha256").hexdigest() == chain for k in self.secrets):
            return "format 1 chain does not match", ""
        self.link = str(chain)
        return None, str(chain)

    def _requested(self, reply: dict[str, Any]) -> None:
        """The inputs of the calls a reply carrying its requests names (`requests`, chats
        recorded in that form: refs in the clear, inputs in its message, maybe encrypted)."""
        message = reply.get("message")
        parts = message.get("content", []) if isinstance(message, dict) else []
        inputs = {p["tool_request"].get("ref"): p["tool_request"].get("input") for p in parts
                  if isinstance(p, dict) and isinstance(p.get("tool_request"), dict)}
        for request in reply.get("requests") or []:
            ref = str(request.get("ref"))
            self.inputs[ref] = ENCRYPTED if "$personal" in reply else inputs.get(ref)

    def _inputs(self, event: dict[str, Any], topic: str) -> str | None:
        """input_sha256 of a decision is the hash of the call's input at that moment."""
        digest = sha256_v2 if self.format == 2 else sha256_v1
        ref = str(event.get("ref"))
        if topic == "interlock:ModelResponded":  # its carried requests, if any (old logs)
            self._requested(event)
        elif "$personal" in event:  # encrypted personal data: its hashes need the plaintext
            self.inputs[ref] = ENCRYPTED
        elif topic == "interlock:ToolRequested":
            self.inputs[ref] = event.get("input")
        elif topic in ("interlock:Responded", "interlock:Restarted"):
            if self.inputs.get(ref) is ENCRYPTED:
                return None
            if ref not in self.inputs or event["input_sha256"] != digest(self.inputs[ref]):
                return f"input_sha256 of {ref} is not the hash of its input"
            if event.get("replaced_input_sha256") is not None:
                if event["replaced_input_sha256"] != digest(event.get("replace_input")):
                    return f"replaced_input_sha256 of {ref} is not the hash of the new input"
                self.inputs[ref] = event.get("replace_input")
        return None


def check_events(lines: list[str], secrets: list[bytes],
                 cp: dict[str, Any] | None, whole: bool,
                 sealing: Sealing | None = None) -> list[str]:
    chats: dict[str, Chat] = {}
    problems: dict[str, str] = {}
    for line in lines:
        row = json.loads(line)
        cid = row["chat_id"]
        if cid in problems:
            continue
        problem = chats.setdefault(cid, Chat(secrets)).add(row) or (
            sealing.problem(cid, row["version"], row["state"]) if sealing else None)
        if problem:
            problems[cid] = f"chat {cid}: version {row['version']}: {problem}"
    out = list(problems.values())
    for cid, version, link in cp["heads"] if cp else []:
        chat = chats.get(cid)
        if chat is None:
            if whole:
                out.append(f"chat {cid}: missing; the checkpoint lists it at version {version}")
        elif cid not in problems and chat.version < version:
            out.append(f"chat {cid}: ends at {chat.version}; the checkpoint lists {version}")
        elif cid not in problems and chat.links.get(version) != link:
            out.append(f"chat {cid}: differs from the checkpoint at version {version}")
    return out


# -- sealing keys: retirement times and the rotation checkpoint ----------------------------


class Sealing:
    """The HMAC keys a checkpoint's statement names (`keys`): a retired key seals nothing
    dated after its retirement, and past a chat's head in the rotation checkpoint only the
    active key seals (`bounds`: each chat's version there). A statement without `keys`
    (written before they were named) checks nothing here."""

    def __init__(self, keys: dict[str, Any] | None, bounds: dict[str, int]) -> None:
        keys = keys or {}
        self.active = keys.get("active")
        self.retired = {k: _time(v) for k, v in (keys.get("retired") or {}).items()}
        self.rotation, self.bounds = keys.get("rotation"), bounds

    def problem(self, chat_id: str, version: int, state: str) -> str | None:
        at = state.rfind(TAIL)
        match = CHAIN_V2.fullmatch(state[at + len(TAIL):-2]) if at >= 0 else None
        kid = match.group(1) if match else None
        if not self.retired or kid == self.active:
            return None
        named = f"key {kid!r}" if kid else "no key (format 1 or none)"
        if kid in self.retired:
            sealed_at = _time(json.loads(state).get("timestamp"))
            retired = self.retired[kid]
            if sealed_at is None or retired is None or sealed_at > retired:
                return f"sealed with {named} after it was retired ({retired})"
        if self.rotation is None:
            return f"sealed with {named}, and no rotation checkpoint covers the retired keys"
        if version > self.bounds.get(chat_id, 0):
            return (f"sealed with {named} after rotation checkpoint {self.rotation}: past it "
                    "only the active key seals")
        return None


def _time(text: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def rotation_of(cp: dict[str, Any], given: dict[str, Any] | None, key: Key) -> tuple[
        dict[str, Any] | None, str | None]:
    """The rotation checkpoint `cp`'s keys name (itself or `given`), checked; or why not."""
    seq = (cp["statement"].get("keys") or {}).get("rotation")
    if seq is None:
        return None, None
    if seq == cp["statement"]["seq"]:
        return cp, None
    if given is None or given["statement"].get("seq") != seq:
        return None, f"rotation checkpoint {seq} is not in the manifest"
    problem = check_checkpoint(given, key) if "heads" in given else (
        None if key.check(jcs(given["statement"]).encode(), given["signature"])
        else f"checkpoint {seq}: signature does not verify")
    return (None, problem) if problem else (given, None)


# -- evidence packs (interlock audit evidence) ----------------------------------------------

DECISIONS = {"interlock:Responded", "interlock:Restarted", "interlock:ApprovalVoted",
             "interlock:InterruptExpired", "interlock:InterruptWithdrawn"}


def root_from_path(index: int, size: int, leaf_hash: bytes, path: list[str]) -> bytes | None:
    """The Merkle root an audit path leads to (RFC 6962 tree), or None if it is malformed."""
    if not 0 <= index < size:
        return None
    node, used = leaf_hash, 0
    while size > 1:
        if index % 2 or index + 1 < size:
            if used >= len(path):
                return None
            sibling = bytes.fromhex(path[used])
            used += 1
            pair = sibling + node if index % 2 else node + sibling
            node = hashlib.sha256(b"\x01" + pair).digest()
        index, size = index // 2, (size + 1) // 2
    return node if used == len(path) else None


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty():
        print(f"\rverifying: events {done}/{total}", end="", file=sys.stderr, flush=True)


def verify_evidence(path: str, key: Key, population: list[str] | None = None) -> list[str]:
    """Every check of an evidence pack: signatures, hashes, chains, proofs, findings."""
    with zipfile.ZipFile(path) as pack:
        files = {n: pack.read(n) for n in pack.namelist()}
    manifest = json.loads(files.pop("manifest.json"))
    signature = manifest.pop("signature", "")
    if manifest.get("format") != "interlock-evidence-1" or manifest.get("key_id") != key.id \
            or not key.check(jcs(manifest).encode(), signature):
        return ["manifest: signature does not verify (edited, or another key)"]
    for name, meta in manifest["files"].items():
        if name not in files or hashlib.sha256(files[name]).hexdigest() != meta["sha256"]:
            return [f"{name}: missing, or its SHA-256 is not the one the manifest signs"]
    if set(files) != set(manifest["files"]):
        return [f"unlisted files in the pack: {sorted(set(files) - set(manifest['files']))}"]
    statement = manifest["checkpoint"]["statement"]
    cp = {"statement": statement, "signature": manifest["checkpoint"]["signature"]}
    if statement.get("format") != "interlock-checkpoint-1" or statement.get("key_id") != key.id \
            or not key.check(jcs(statement).encode(), cp["signature"]):
        return ["checkpoint: signature does not verify"]
    streams, problems = _chains(files["events.jsonl"].decode().splitlines())
    proofs = files["proofs.jsonl"].decode().splitlines()
    problems += _proven(proofs, streams, statement)
    problems += _sealed(manifest, cp, key, proofs, streams)
    problems = problems or _review(manifest, streams, json.loads(files["findings.json"]))
    if problems or population is None:
        return problems
    opened = json.loads(streams[manifest["review_id"]][1][0]["state"])
    return check_sample(manifest["sample"], opened["items"], population)


def _chains(lines: list[str]) -> tuple[dict[str, tuple[Chat, list[dict[str, Any]]]], list[str]]:
    streams: dict[str, tuple[Chat, list[dict[str, Any]]]] = {}
    problems: list[str] = []
    for done, line in enumerate(lines, start=1):
        row = json.loads(line)
        chat, rows = streams.setdefault(row["chat_id"], (Chat([]), []))
        problem = chat.add(row)
        if problem:
            problems.append(f"stream {row['chat_id']}: version {row['version']}: {problem}")
        rows.append(row)
        if done % 1000 == 0 or done == len(lines):
            _progress(done, len(lines))
    if lines and sys.stderr.isatty():
        print(file=sys.stderr)
    return streams, problems[:20]


def _proven(lines: list[str], streams: dict[str, tuple[Chat, list[dict[str, Any]]]],
            statement: dict[str, Any]) -> list[str]:
    """Each stream ends at the head the checkpoint lists, proven against its signed root."""
    problems, proven = [], set()
    for line in lines:
        p = json.loads(line)
        chat = streams.get(p["chat_id"], (None, []))[0]
        ends = chat is not None and chat.version == p["version"]
        if chat is None or not ends or chat.links.get(p["version"]) != p["link"]:
            problems.append(f"stream {p['chat_id']}: does not end at the head its proof names")
            continue
        root = root_from_path(p["index"], statement["chats"],
                              leaf(p["chat_id"], p["version"], p["link"]), p["path"])
        if root is None or root.hex() != statement["root"]:
            problems.append(f"stream {p['chat_id']}: not in the signed checkpoint")
        proven.add(p["chat_id"])
    problems += [f"stream {s}: no proof" for s in streams if s not in proven]
    return problems


def _sealed(manifest: dict[str, Any], cp: dict[str, Any], key: Key, proofs: list[str],
            streams: dict[str, tuple[Chat, list[dict[str, Any]]]]) -> list[str]:
    """Each stream's events were sealed by keys the checkpoint allows: a retired key only
    before its retirement, and only up to the stream's head in the rotation checkpoint (its
    audit path in the proofs leads to that checkpoint's signed root)."""
    rotated, problem = rotation_of(cp, manifest.get("rotation"), key)
    if problem:
        return [problem]
    bounds: dict[str, int] = {}
    problems = []
    for line in proofs if rotated else []:
        p, then = json.loads(line), json.loads(line).get("rotation")
        chat = streams.get(p["chat_id"], (None, []))[0]
        if then is None or chat is None:
            continue
        root = root_from_path(then["index"], rotated["statement"]["chats"],
                              leaf(p["chat_id"], then["version"], then["link"]), then["path"])
        if root is None or root.hex() != rotated["statement"]["root"] \
                or chat.links.get(then["version"]) != then["link"]:
            problems.append(f"stream {p['chat_id']}: its head in rotation checkpoint "
                            f"{rotated['statement']['seq']} is not proven")
            continue
        bounds[p["chat_id"]] = then["version"]
    if not cp["statement"].get("keys"):
        problems += _unnamed_keys(streams)
    sealing = Sealing(cp["statement"].get("keys"), bounds)
    for stream, (_, rows) in streams.items():
        for row in rows:
            problem = sealing.problem(stream, row["version"], row["state"])
            if problem:
                problems.append(f"stream {stream}: version {row['version']}: {problem}")
                break
    return problems


def _kid(state: str) -> str | None:
    at = state.rfind(TAIL)
    match = CHAIN_V2.fullmatch(state[at + len(TAIL):-2]) if at >= 0 else None
    return match.group(1) if match else None


def _unnamed_keys(streams: dict[str, tuple[Chat, list[dict[str, Any]]]]) -> list[str]:
    """A checkpoint that names no keys cannot say when a key was retired: events sealed
    with more than one key need a checkpoint that does (`keys` with retirement times)."""
    kids = {_kid(r["state"]) for _, rows in streams.values() for r in rows} - {None}
    if len(kids) <= 1:
        return []
    return [f"events are sealed with keys {sorted(k for k in kids if k)} but the checkpoint "
            "names no keys and when they were retired: a retired key's late seal would pass"]


def _review(manifest: dict[str, Any], streams: dict[str, tuple[Chat, list[dict[str, Any]]]],
            findings: dict[str, Any]) -> list[str]:
    """The review's own events say what the manifest and findings.json say."""
    rows = streams.get(manifest["review_id"], (None, []))[1]
    events = [(r["topic"], json.loads(r["state"])) for r in rows]
    if not events or events[0][0] != "interlock:ReviewOpened":
        return ["the review's stream does not begin with ReviewOpened"]
    opened = events[0][1]
    if (opened["query"], _method(opened["sample"])) != (manifest["query"],
                                                       _method(manifest["sample"])):
        return ["the manifest's query or sample is not the one the review recorded"]
    if findings.get("review_id") != manifest["review_id"]:
        return [f"findings.json is review {findings.get('review_id')}'s, not the pack's "
                f"review {manifest['review_id']}"]
    listed = findings.get("items")
    if not isinstance(listed, list) or len(listed) != len(opened["items"]):
        return [f"findings.json lists {len(listed) if isinstance(listed, list) else 'no'} "
                f"items; the review recorded {len(opened['items'])}"]
    assessed = {e["item"]: e for t, e in events if t == "interlock:ItemAssessed"}
    signed = [e for t, e in events if t == "interlock:ReviewSignedOff"]
    problems = [] if signed else ["the review was not signed off"]
    problems += _receipts(manifest, opened["items"], streams)
    for item, said in zip(opened["items"], listed, strict=True):
        problems += _item(item, streams)
        if any(said.get(k) != item.get(k) for k in ("n", "chat_id", "version", "ref")):
            problems.append(f"item {item['n']}: findings.json names another call than the "
                            "review recorded")
            continue
        done, told = assessed.get(item["n"]), said.get("assessment")
        if done is None or told is None or any(
                told.get(k) != done[k] for k in ("verdict", "severity", "note", "actor")):
            problems.append(f"item {item['n']}: findings.json does not say what was assessed")
    if signed and findings.get("signed_off_by") != signed[-1]["actor"]:
        problems.append("findings.json names another signer than the review's events")
    found = sum(e["verdict"] == "finding" for e in assessed.values())
    if findings.get("findings") != found:
        problems.append(f"findings.json counts {findings.get('findings')} findings; the "
                        f"review's events record {found}")
    return problems + _second_signer(opened, events, findings)


def receipts_id(chat_id: str, ref: str) -> str:
    """A call's view receipt stream (domain/receipts.py)."""
    return str(uuid5(NAMESPACE_URL, f"interlock:receipts:{chat_id}:{ref}"))


def _receipts(manifest: dict[str, Any], items: list[dict[str, Any]],
              streams: dict[str, tuple[Chat, list[dict[str, Any]]]]) -> list[str]:
    """Each item's receipt stream is named by the signed manifest (null: the call's page was
    never opened) and, when named, is in the pack; a receipt stream in the pack is named."""
    named = manifest.get("receipts")
    if not isinstance(named, dict):
        return ["the manifest names no item's view receipt stream"]
    problems = []
    for item in items:
        expected = receipts_id(item["chat_id"], item["ref"])
        said = named.get(str(item["n"]), "absent")
        if said == "absent" or said not in (None, expected):
            problems.append(f"item {item['n']}: the manifest does not name its receipt stream")
        elif said is None and expected in streams:
            problems.append(f"item {item['n']}: its receipt stream is in the pack but the "
                            "manifest says its page was never opened")
        elif said is not None and expected not in streams:
            problems.append(f"item {item['n']}: its receipt stream {said} is not in the pack")
        elif said is not None and any(
                json.loads(r["state"]).get("chat_id") != item["chat_id"]
                or json.loads(r["state"]).get("ref") != item["ref"]
                for r in streams[expected][1]):
            problems.append(f"item {item['n']}: its receipt stream holds another call's "
                            "receipts")
    return problems


def _second_signer(opened: dict[str, Any], events: list[tuple[str, dict[str, Any]]],
                   findings: dict[str, Any]) -> list[str]:
    """A review opened for two signers: countersigned by another person, as findings says."""
    if opened.get("signers", 1) < 2:
        return []
    first = [e["actor"] for t, e in events if t == "interlock:ReviewSignedOff"]
    second = [e["actor"] for t, e in events if t == "interlock:ReviewCountersigned"]
    if not second:
        return ["the review needs a second signer and has none"]
    if first and second[-1].strip().casefold() == first[-1].strip().casefold():
        return ["the second signer is the first"]
    if findings.get("countersigned_by") != second[-1]:
        return ["findings.json names another second signer than the review's events"]
    return []


def _method(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample record with its method; one recorded before methods were named has none."""
    return {"method": "sha256-v1", **sample}


def _item(item: dict[str, Any], streams: dict[str, tuple[Chat, list[dict[str, Any]]]]
          ) -> list[str]:
    rows = streams.get(item["chat_id"], (None, []))[1]
    decided = [r for r in rows if r["version"] == item["version"]]
    if not decided or decided[0]["topic"] not in DECISIONS:
        return [f"item {item['n']}: its decision {item['chat_id']}#{item['version']} "
                "is not in the pack"]
    return []


# -- samples (domain/review/sampling.py, restated) ------------------------------------------

M32 = 0xFFFFFFFF


def key_word(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


def lookup3(k: int, seed: int) -> int:
    """PostgreSQL's hash_uint32_extended (hashint4extended): Jenkins' lookup3, signed."""
    def rot(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & M32
    a = b = c = (0x9E3779B9 + 4 + 3923095) & M32
    seed &= (1 << 64) - 1
    if seed:
        a, b = (a + (seed >> 32)) & M32, (b + seed) & M32
        for r1, r2, r3 in ((4, 6, 8), (16, 19, 4)):
            a = ((a - c) & M32) ^ rot(c, r1)
            c = (c + b) & M32
            b = ((b - a) & M32) ^ rot(a, r2)
            a = (a + c) & M32
            c = ((c - b) & M32) ^ rot(b, r3)
            b = (b + a) & M32
    a = (a + k) & M32
    c = ((c ^ b) - rot(b, 14)) & M32
    a = ((a ^ c) - rot(c, 11)) & M32
    b = ((b ^ a) - rot(a, 25)) & M32
    c = ((c ^ b) - rot(b, 16)) & M32
    a = ((a ^ c) - rot(c, 4)) & M32
    b = ((b ^ a) - rot(a, 14)) & M32
    c = ((c ^ b) - rot(b, 24)) & M32
    value = b << 32 | c
    return value - (1 << 64) if value >= 1 << 63 else value


def rank_key(seed: str, method: str) -> Any:
    """Sort key of a candidate (chat_id, version) under `method` for `seed`."""
    if method == "mix64-v2":
        word = key_word(seed)

        def mixed(c: tuple[str, int]) -> tuple[int, str, int]:
            w = key_word(f"{c[0]}#{c[1]}")
            return lookup3(w & M32, lookup3((w >> 32) & M32, word)), c[0], c[1]
        return mixed
    if method == "sha256-v1":
        return lambda c: hashlib.sha256(f"{seed}\n{c[0]}#{c[1]}".encode()).digest()
    raise ValueError(f"unknown sampling method {method!r}")


def allot(sizes: dict[tuple[str, ...], int], total: int) -> dict[tuple[str, ...], int]:
    """Seats per stratum: proportional, largest remainder, one each first if possible."""
    n = sum(sizes.values())
    if total == 0 or n == 0:
        return dict.fromkeys(sizes, 0)
    floor = 1 if total >= len(sizes) else 0
    left = total - floor * len(sizes)
    shares = {k: left * v / n for k, v in sizes.items()}
    seats = {k: min(sizes[k], floor + int(shares[k])) for k in sizes}
    order = sorted(sizes, key=lambda k: (-(shares[k] - int(shares[k])), k))
    while sum(seats.values()) < total:
        for k in order:
            if sum(seats.values()) < total and seats[k] < sizes[k]:
                seats[k] += 1
    return seats


def draw(population: list[tuple[str, int, tuple[str, ...]]], size: int, seed: str,
         method: str) -> list[tuple[str, int]]:
    """The sample the rule draws: each stratum's lowest ranks, strata in sorted order."""
    groups: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for chat_id, version, strata in population:
        groups.setdefault(strata, []).append((chat_id, version))
    seats = allot({k: len(v) for k, v in groups.items()}, min(size, len(population)))
    key = rank_key(seed, method)
    return [c for k in sorted(groups) for c in sorted(groups[k], key=key)[:seats[k]]]


def check_sample(sample: dict[str, Any], items: list[dict[str, Any]],
                 population_lines: list[str]) -> list[str]:
    """The recorded sample drawn again from the population the query answered."""
    population = [(r["chat_id"], int(r["version"]), tuple(r["strata"]))
                  for r in map(json.loads, population_lines) if r]
    sizes: dict[str, int] = {}
    for _, _, strata in population:
        sizes["|".join(strata)] = sizes.get("|".join(strata), 0) + 1
    if (len(population), sizes) != (sample["population"], sample["strata_sizes"]):
        return [f"population: {len(population)} candidates in strata {sizes}; the review "
                f"recorded {sample['population']} in {sample['strata_sizes']}"]
    method = _method(sample)["method"]
    again = draw(population, sample["size"], sample["seed"], method)
    if again != [(i["chat_id"], i["version"]) for i in items]:
        return [f"sample: seed {sample['seed']!r} ({method}) draws other items from this "
                "population than the review holds"]
    return []


# -- the command ----------------------------------------------------------------------------


def verify(args: argparse.Namespace) -> list[str]:
    key = Key(Path(args.public_key).read_text())
    if zipfile.is_zipfile(args.export):
        population = (Path(args.population).read_text().splitlines()
                      if args.population else None)
        return verify_evidence(args.export, key, population)
    data = Path(args.export).read_bytes()
    manifest = json.loads(Path(args.manifest or f"{args.export}.manifest.json").read_text())
    signature = manifest.pop("signature", "")
    if manifest.get("key_id") != key.id or not key.check(jcs(manifest).encode(), signature):
        return ["manifest: signature does not verify (edited, or another key)"]
    if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        return ["export: its SHA-256 is not the one the manifest signs (the export was edited)"]
    cp = manifest["checkpoint"]
    problem = check_checkpoint(cp, key)
    if problem:
        return [problem]
    if args.checkpoints:
        found = _in_sequence(Path(args.checkpoints).read_text().splitlines(), cp, key)
        if found:
            return [found]
    if manifest["kind"] != "events":
        return []
    rotated, problem = rotation_of(cp, manifest.get("rotation"), key)
    if problem:
        return [problem]
    bounds = {c: v for c, v, _ in rotated["heads"]} if rotated else {}
    secrets = [s.encode() for s in Path(args.secrets_file).read_text().splitlines() if s] \
        if args.secrets_file else []
    whole = all(v is None for v in manifest["filter"].values())
    return check_events(data.decode().splitlines(), secrets, cp, whole,
                        Sealing(cp["statement"].get("keys"), bounds))


def _in_sequence(lines: list[str], cp: dict[str, Any], key: Key) -> str | None:
    checkpoints = [json.loads(line) for line in lines if line.strip()]
    problem = check_sequence(checkpoints, key)
    if problem:
        return problem
    if cp not in checkpoints:
        return "the manifest's checkpoint is not in the checkpoints file"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", help="the exported file")
    parser.add_argument("--public-key", required=True, help="file with 64 hex digits")
    parser.add_argument("--manifest", help="default: <export>.manifest.json")
    parser.add_argument("--checkpoints", help="exported checkpoints (JSON Lines)")
    parser.add_argument("--secrets-file", help="HMAC secrets, one per line: check seals too")
    parser.add_argument("--population", help="an evidence pack's population (JSON Lines of "
                                             "chat_id, version, strata): draw it again")
    args = parser.parse_args(argv)
    try:
        problems = verify(args)
    except (OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile) as exc:
        problems = [f"unreadable input: {exc}"]
    for p in problems:
        print(p)
    what = "evidence pack" if args.export.endswith(".zip") else "export"
    print(f"{what} verifies" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
