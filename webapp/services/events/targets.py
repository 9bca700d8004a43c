"""Where a webhook may be delivered (docs/events.md#webhook-targets, SECURITY.md).

A webhook URL is typed by a System-Admin, but the POSTs leave from the worker's host: without
a check, a URL naming the cloud's metadata service, the database's port or the app itself
would make the webhooks page a port scanner and a way into the private network.

Guarantees of `check(url, allow)`: it returns a `Target` only for an http(s) URL without
credentials whose host resolves (getaddrinfo, so every spelling the C library accepts:
`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`, IPv6) to addresses that are all public.
Loopback, link-local (169.254/16 and fe80::/10: every cloud metadata address), unspecified,
multicast, reserved, private (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, site-local),
documentation and benchmarking ranges are refused, also when embedded in IPv6 (IPv4-mapped
::ffff:a.b.c.d, IPv4-compatible, 6to4 2002::/16, NAT64 64:ff9b::/96; Teredo and the local-use
NAT64 prefix 64:ff9b:1::/48 are refused whole). An address inside one of `allow`
(WEBHOOK_ALLOW_NETWORKS) is accepted whatever it is. The Target carries the addresses that were
checked: a caller connects to one of them, never to a fresh lookup of the name, so a DNS answer
that changes (rebinding) cannot bypass the check. Otherwise `Refused`, whose `category` is what
a delivery attempt stores.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from urllib.parse import urlsplit

from flask import current_app, has_app_context

Network = IPv4Network | IPv6Network
Address = IPv4Address | IPv6Address

ADDRESS_NOT_ALLOWED = "address not allowed"
NAME_NOT_RESOLVED = "name not resolved"

NAT64 = IPv6Network("64:ff9b::/96")  # the well-known prefix: a public IPv4 address inside
# The local-use prefix (RFC 8215): a network's own translator, whose IPv4 side may be private,
# at a place in the address its operator chose. Python 3.11 counts it as global.
NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")


class Refused(Exception):
    """A URL a webhook may not target: `category` (stored with a delivery attempt) and a
    sentence for the person who typed it."""

    def __init__(self, category: str, message: str):
        super().__init__(message)
        self.category = category
        self.message = message


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (one of `addresses`) and what to say there."""

    scheme: str  # http or https
    host: str  # the name as written, lower case: the certificate must match it
    port: int
    path: str  # path and query, "/" at least
    host_header: str  # the Host header: the URL's host[:port] as written
    addresses: tuple[str, ...]  # every address the name resolved to, each one checked


def allowed_networks() -> tuple[Network, ...]:
    """WEBHOOK_ALLOW_NETWORKS of the app in context (checked at start); () outside one."""
    if not has_app_context():
        return ()
    return tuple(current_app.config.get("WEBHOOK_ALLOW_NETWORKS") or ())


def _kind(ip: Address) -> str | None:
    """What makes `ip` not a public address, or None when it is one."""
    if isinstance(ip, IPv6Address):
        if ip.teredo is not None:
            return "a Teredo tunnel address"
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in NAT64:
            embedded = IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return _kind(embedded)
        if ip in NAT64_LOCAL:
            return "a local NAT64 address"
        if ip.is_site_local:
            return "a private address"
    # Multicast first: Python 3.11 counts IPv4 multicast as global.
    for test, kind in (
        (ip.is_multicast, "a multicast address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_reserved, "a reserved address"),
        (ip.is_private, "a private address"),
        (not ip.is_global, "not a public address"),  # 100.64/10, documentation ranges, …
    ):
        if test:
            return kind
    return None


def refusal(address: str, allow: Iterable[Network] = ()) -> str | None:
    """Why a webhook may not be delivered to `address` (an IP address as getaddrinfo writes
    it), or None if it may: a public address, or one inside a network of `allow`."""
    ip = ip_address(address.partition("%")[0])  # an IPv6 zone (fe80::1%eth0) says nothing
    mapped = ip.ipv4_mapped if isinstance(ip, IPv6Address) else None
    if any(ip in net or (mapped is not None and mapped in net) for net in allow):
        return None
    return _kind(ip)


def resolve(host: str, port: int) -> tuple[str, ...]:
    """The addresses `host` resolves to, in the resolver's order; Refused if none."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise Refused(NAME_NOT_RESOLVED, f"The URL's host {host} does not resolve.") from None
    addresses: list[str] = []
    for *_, sockaddr in found:
        if str(sockaddr[0]) not in addresses:
            addresses.append(str(sockaddr[0]))
    if not addresses:
        raise Refused(NAME_NOT_RESOLVED, f"The URL's host {host} does not resolve.")
    return tuple(addresses)


def check(url: str, allow: Iterable[Network] = ()) -> Target:
    """The URL as a Target to connect to, every address its host resolves to checked (module
    docstring); Refused otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise Refused(ADDRESS_NOT_ALLOWED, "The URL is not a valid http(s) URL.") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise Refused(ADDRESS_NOT_ALLOWED, "The URL must be http:// or https:// with a host.")
    if "@" in parts.netloc:
        raise Refused(ADDRESS_NOT_ALLOWED, "The URL may not hold credentials (user:password@).")
    host = parts.hostname  # lower case, IPv6 without its brackets
    port = port or (443 if scheme == "https" else 80)
    addresses = resolve(host, port)
    allow = tuple(allow)
    for address in addresses:
        if (kind := refusal(address, allow)) is not None:
            named = "is" if address == host else "resolves to"
            raise Refused(
                ADDRESS_NOT_ALLOWED,
                f"The URL's host {host} {named} {kind}: webhooks go only to public addresses "
                "(WEBHOOK_ALLOW_NETWORKS lets an operator allow a network).",
            )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme, host, port, path, parts.netloc, addresses)
