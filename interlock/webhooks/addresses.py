"""Where webhooks may go: public addresses only, unless an operator allows more.

A URL's host is checked when it is subscribed (a literal address in any spelling, and the
names that always mean this machine or its cloud's metadata service), and every address
its name resolves to is checked again when a notification is sent; the sender connects to
the address that was checked, so a name that resolves differently later (DNS rebinding)
cannot reach what was refused. `allow` lists the addresses, networks (CIDR) and host names
an operator opens anyway (INTERLOCK_WEBHOOK_ALLOW_HOSTS), e.g. `127.0.0.1` for tests.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from interlock.domain.errors import InvalidRequestError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolve = Callable[[str, int], Sequence[str]]
ALLOW_SETTING = "INTERLOCK_WEBHOOK_ALLOW_HOSTS"
_LOCAL_NAMES = ("localhost", "metadata")
_LOCAL_SUFFIXES = (".localhost", ".internal", ".local")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# getaddrinfo has no timeout: an attempt waits for its answer at most its deadline, and a
# resolver that hangs holds one of these threads until the system gives up (seconds).
_DNS = ThreadPoolExecutor(16, thread_name_prefix="webhooks-dns")


class RefusedAddressError(InvalidRequestError):
    """A webhook URL names an address webhooks are not sent to (a 422 when subscribing)."""


def system_resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, as the system resolver answers."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


class AddressPolicy:
    """Refuses private, loopback, link-local, reserved, multicast and unspecified
    addresses, except those `allow` names."""

    def __init__(self, allow: Sequence[str] = (), resolve: Resolve = system_resolve) -> None:
        self.networks: list[Network] = []
        self.names: set[str] = set()
        for entry in (e.strip() for e in allow):
            if entry:
                self._allow(entry)
        self.resolve = resolve

    def _allow(self, entry: str) -> None:
        try:
            self.networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            self.names.add(_name(entry))

    def check_host(self, host: str) -> None:
        """Refuse a host no delivery may go to, before anything is recorded."""
        name = _name(host)
        if name in self.names:
            return
        address = literal(name)
        if address is not None:
            self._check(address, host)
        elif name in _LOCAL_NAMES or name.endswith(_LOCAL_SUFFIXES):
            raise RefusedAddressError(
                f"the host {host} names this machine or its cloud's internal services:"
                f" webhooks go to public addresses only{_HOW}", host=host)

    def addresses(self, host: str, port: int, timeout: float) -> list[Address]:
        """Where a delivery to `host` may connect, every resolved address checked."""
        self.check_host(host)
        name = _name(host)
        address = literal(name)
        if address is not None:
            return [address]
        future = _DNS.submit(self.resolve, name, port)
        try:
            found = [ipaddress.ip_address(a.split("%")[0]) for a in future.result(timeout)]
        except FutureTimeout:
            raise TimeoutError(f"resolving {host} took longer than the deadline") from None
        if name not in self.names:
            for address in found:
                self._check(address, host)
        return found

    def _check(self, address: Address, host: str) -> None:
        if any(address in net for net in self.networks if net.version == address.version):
            return
        problem = refused(address)
        if problem is not None:
            raise RefusedAddressError(
                f"the host {host} is {address}, {problem}: webhooks go to public addresses"
                f" only{_HOW}", host=host, address=str(address))


_HOW = f" (an operator may allow it with {ALLOW_SETTING})"


def refused(address: Address) -> str | None:
    """Why webhooks are not sent to `address`; None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour or (
            address.teredo[1] if address.teredo else None) or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in _NAT64 else None)
        if inner is not None:
            problem = refused(inner)
            return None if problem is None else f"{problem} (inside an IPv6 address)"
    for problem, test in (("unspecified", address.is_unspecified),
                          ("a loopback address", address.is_loopback),
                          ("a link-local address", address.is_link_local),
                          ("a multicast address", address.is_multicast),
                          ("a private address", address.is_private),
                          ("a reserved address", address.is_reserved),
                          ("not a public address", not address.is_global)):
        if test:
            return problem
    return None


def literal(host: str) -> Address | None:
    """The address a host spells, in any form a resolver accepts (`127.1`, `0x7f000001`,
    `2130706433`, `[::ffff:127.0.0.1]`); None for a name."""
    bare = host.strip("[]")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if not bare or not all(c in "0123456789abcdefx." for c in bare):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(bare))
    except OSError:
        return None


def _name(host: str) -> str:
    return host.strip().lower().rstrip(".")
