"""A replay-test's report: each chat's verdict, totals by kind, accepted differences, and
the same as JSON and as JUnit XML (one test case per chat) for CI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from pydantic import BaseModel, ConfigDict, ValidationError

from interlock.domain.errors import ConfigurationError
from interlock.replay.differences import Kind
from interlock.replay.runner import ChatResult


class Allowed(BaseModel):
    """An accepted difference: every field given must match (kind, chat, agent, event)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Kind
    chat_id: str | None = None
    agent: str | None = None
    event: str | None = None
    why: str = ""

    def covers(self, result: ChatResult) -> bool:
        d = result.difference
        return d is not None and d.kind == self.kind and all(
            want is None or want == got for want, got in (
                (self.chat_id, result.chat_id), (self.agent, result.agent),
                (self.event, d.event)))


def load_allowed(path: Path) -> list[Allowed]:
    """`--allow FILE`: a JSON list of accepted differences, e.g.
    [{"kind": "prompt_drift", "agent": "bankingAgent", "why": "new prompt, reviewed"}]."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, list):
        raise ConfigurationError(f"{path}: expected a JSON list of accepted differences")
    return [_allowed(path, n, item) for n, item in enumerate(data)]


def _allowed(path: Path, n: int, item: Any) -> Allowed:
    try:
        return Allowed.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in (n, *first["loc"]))
        raise ConfigurationError(f"{path}: entry {where}: {first['msg']}") from None


class Report(BaseModel):
    chats: list[ChatResult] = []
    totals: dict[str, int] = {}
    identical: int = 0
    allowed: int = 0
    different: int = 0
    skipped: int = 0  # forks (their source's replay tests their history), erased chats
    seconds: float = 0.0

    @classmethod
    def of(cls, results: list[ChatResult], allowed: list[Allowed], seconds: float) -> Report:
        judged = [_judged(r, allowed) for r in results]
        totals = Counter(r.difference.kind for r in judged if r.difference is not None)
        status = Counter(r.status for r in judged)
        return cls(chats=judged, totals=dict(sorted(totals.items())),
                   identical=status["identical"], allowed=status["allowed"],
                   different=status["different"], skipped=status["skipped"],
                   seconds=round(seconds, 3))

    @property
    def passed(self) -> bool:
        return self.different == 0

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in self.totals.items()) or "none"
        skipped = f", {self.skipped} skipped (forks, erased)" if self.skipped else ""
        return (f"{len(self.chats)} chats: {self.identical} identical, {self.allowed} allowed, "
                f"{self.different} different ({kinds}){skipped} in {self.seconds:.1f}s")

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    def to_junit(self) -> str:
        suite = ET.Element("testsuite", name="interlock replay-test", tests=str(len(self.chats)),
                           failures=str(self.different),
                           skipped=str(self.allowed + self.skipped),
                           time=f"{self.seconds:.3f}")
        for result in self.chats:
            case = ET.SubElement(suite, "testcase", classname=result.agent,
                                 name=result.chat_id)
            _outcome(case, result)
        return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _judged(result: ChatResult, allowed: list[Allowed]) -> ChatResult:
    if result.status == "different" and any(a.covers(result) for a in allowed):
        return result.model_copy(update={"status": "allowed"})
    return result


def _outcome(case: ET.Element, result: ChatResult) -> None:
    d = result.difference
    if result.status == "skipped":
        ET.SubElement(case, "skipped", message="; ".join(result.notes))
    if d is None:
        return
    text = _text(d.model_dump(mode="json"))
    message = f"{d.kind} at version {d.version} ({d.event}) {d.detail}".strip()
    tag = "skipped" if result.status == "allowed" else "failure"
    element = ET.SubElement(case, tag, message=message, type=d.kind)
    element.text = text


def _text(data: dict[str, Any]) -> str:
    diff = data.pop("diff", None)
    return json.dumps(data, indent=1, ensure_ascii=False) + (f"\n{diff}" if diff else "")
