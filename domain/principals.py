"""Principals: who acts (id, tenant, roles, groups), as the API authenticates them and as
notifications route held calls to them; and the directory of the ones a server knows."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from interlock.domain.chat.policies import Decider
from interlock.domain.errors import ForbiddenError

Role = Literal["requester", "approver", "auditor", "admin"]
NAME = r"^[a-z][a-z0-9_.-]{0,63}$"  # a role or group name, such as `treasury`
# A principal id: ASCII letters, digits and ._@+- only, so no two ids read the same (no
# invisible characters, no look-alike letters of another script, no spaces)
PRINCIPAL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}")
ALL_ROLES: frozenset[str] = frozenset({"requester", "approver", "auditor", "admin"})


class Principal(BaseModel):
    """Who is calling: the actor recorded on events, the tenant it may see, its roles."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=200)
    tenant: str = Field(default="default", min_length=1, max_length=200)
    roles: frozenset[Annotated[str, Field(pattern=NAME)]] = frozenset()  # built-in or custom
    groups: frozenset[Annotated[str, Field(pattern=NAME)]] = frozenset()

    @field_validator("id")
    @classmethod
    def _plain_id(cls, value: str) -> str:
        if value != value.strip():
            raise ValueError("a principal id must not start or end with spaces")
        if PRINCIPAL_ID.fullmatch(value) is None:
            odd = next((c for c in value if not (c.isascii() and (c.isalnum() or c in "._@+-"))),
                       value[:1])
            raise ValueError(
                f"principal id {value!r} may hold only ASCII letters, digits and . _ @ + - "
                f"(beginning with a letter or digit); it holds {_named(odd)}")
        return value

    def decider(self) -> Decider:
        """This principal as the domain's approval rules see it."""
        return Decider(self.id, frozenset(self.roles), frozenset(self.groups))

    def require(self, role: Role) -> None:
        """Admins may do anything; everyone else needs the role."""
        if role not in self.roles and "admin" not in self.roles:
            raise ForbiddenError(f"{self.id} lacks the {role} role", principal=self.id, role=role)


def _named(char: str) -> str:
    """A character with its code point and name, so a reader can tell look-alikes apart."""
    return f"{char!r} (U+{ord(char):04X} {unicodedata.name(char, 'unnamed')})"


DEV_PRINCIPAL = Principal(id="dev", tenant="default", roles=ALL_ROLES)


class Directory(Protocol):
    """The principals a server knows, by their key's digest (None: dev mode, no keys);
    the API's `AuthConfig` is one."""

    @property
    def keys(self) -> Mapping[str, Principal] | None: ...


def of_tenant(directory: Directory, tenant: str) -> dict[str, Principal]:
    """The tenant's principals by id (a principal with several keys is one)."""
    return {p.id: p for p in (directory.keys or {}).values() if p.tenant == tenant}
