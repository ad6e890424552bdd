"""One email address: RFC 5322's addr-spec (`local@domain`), read by the standard library's
parser, with nothing around it: no display name, no second address, no comment, no line
break (a CR/LF in a To header would add headers of its own, or end the notifier's send)."""

from __future__ import annotations

from email.errors import HeaderParseError
from email.headerregistry import Address

LONGEST = 254  # RFC 5321: the longest path a mail server must take, less its brackets


def addr_spec(value: str) -> str:
    """`value` when it is exactly one addr-spec, as written; else ValueError saying why."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{value!r} holds a control character (CR/LF?): one address, one line")
    if not value.isascii() or len(value) > LONGEST:
        raise ValueError(f"{value!r} is not an ASCII address of at most {LONGEST} characters")
    try:
        parsed: Address | None = Address(addr_spec=value)
    except (ValueError, IndexError, HeaderParseError):  # the parser's refusals, by kind
        parsed = None
    if parsed is None or parsed.addr_spec != value or not (parsed.username and parsed.domain):
        raise ValueError(f"{value!r} is not one email address: an RFC 5322 addr-spec such as"
                         " ted@acme.test, without a name, a list or a comment")
    return value
