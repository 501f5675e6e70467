"""Who may read what: the optional bearer token and the loopback test.

With a token file, /metrics and /jobs require `Authorization: Bearer <token>`; without one, /jobs (user,
account and job names) answers only to loopback peers. /healthz is always open."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import threading

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16


def read_token(path: str) -> bytes:
    """The token in `path`, surrounding whitespace removed (as Prometheus's credentials_file does).
    Raises OSError when unreadable, ValueError when it is not one usable token."""
    with open(path, "rb") as f:
        token = f.read(4097).strip()
    if not token:
        raise ValueError("the file is empty")
    if len(token) > 4096:
        raise ValueError("the token is longer than 4096 bytes")
    if any(b <= 0x20 or b >= 0x7F for b in token):
        raise ValueError("the token must be one word of printable ASCII")
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"the token is shorter than {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)")
    return token


class TokenFile:
    """The agent's token, read at start-up and read again whenever the file changes, so that a rotated
    Kubernetes Secret takes effect without a restart. If the file later becomes unreadable or invalid the
    last good token stays in force (the agent never falls back to serving without one)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._token = read_token(path)

    def _stat(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)

    def current(self) -> bytes:
        stamp = self._stat()
        with self._lock:
            if stamp is not None and stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._token = read_token(self.path)
                    log.info("auth: token file %s changed; using the new token", self.path)
                except (OSError, ValueError) as exc:
                    log.warning(
                        "auth: token file %s changed but is unusable (%s); keeping the last token", self.path, exc
                    )
            return self._token


def bearer_matches(header: str | None, token: bytes) -> bool:
    """Whether an Authorization header carries `token` as a bearer token. Constant time: the digests of
    both are compared with hmac.compare_digest, so neither the content nor the length leaks."""
    if not header or not token:
        return False
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    # http.client decodes header values as Latin-1: encode back to the bytes that were sent
    sent = given.strip().encode("latin-1", "replace")
    return hmac.compare_digest(hashlib.sha256(sent).digest(), hashlib.sha256(token).digest())


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1, ::ffff:127.x.y.z or `localhost`. Any other name or address (0.0.0.0, ::,
    a host name) is not: an unknown name may resolve to anything."""
    host = host.strip("[]").split("%", 1)[0]
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback
