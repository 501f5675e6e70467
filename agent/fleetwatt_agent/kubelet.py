"""Pod namespace and name from the kubelet's pod-resources socket (gRPC, v1.PodResourcesLister/List).

The agent depends on nothing but nvidia-ml-py and prometheus-client, so this is a minimal gRPC unary
call over a Unix socket (HTTP/2 with prior knowledge, headers as HPACK literals, which every HTTP/2
server accepts) and a protobuf wire-format reader for the three messages it needs. Response headers
are not decoded: the call succeeded when a gRPC message came back.

pod-resources lists pods by namespace and name, not by UID, so a pod found in a process's cgroup
(`pod<uid>`) is matched by name: Kubernetes sets HOSTNAME to the pod's name in its containers
(hostNetwork pods aside). The match must be unique on the node; otherwise the pod is `k8s/pod-uid/<uid>`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
LIST_METHOD = "/v1.PodResourcesLister/List"


class GrpcError(Exception):
    pass


# -- protobuf wire format --------------------------------------------------------------------------
def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field_bytes(number: int, payload: bytes) -> bytes:
    """A length-delimited field (strings, bytes, messages)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of a message."""
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(buf, i)
            yield number, wire, value
        elif wire == 2:
            length, i = _read_varint(buf, i)
            yield number, wire, buf[i : i + length]
            i += length
        elif wire == 1:
            yield number, wire, int.from_bytes(buf[i : i + 8], "little")
            i += 8
        elif wire == 5:
            yield number, wire, int.from_bytes(buf[i : i + 4], "little")
            i += 4
        else:
            raise GrpcError(f"unsupported protobuf wire type {wire}")


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf):
            raise GrpcError("truncated protobuf")
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7


@dataclass(frozen=True)
class PodResources:
    namespace: str
    name: str
    device_ids: tuple[str, ...]


def parse_list_response(buf: bytes) -> list[PodResources]:
    """ListPodResourcesResponse{1: repeated PodResources{1 name, 2 namespace, 3 repeated
    ContainerResources{1 name, 2 repeated ContainerDevices{1 resource_name, 2 repeated device_ids}}}}."""
    pods = []
    for number, wire, pod in fields(buf):
        if number != 1 or wire != 2:
            continue
        assert isinstance(pod, bytes)
        name = namespace = ""
        devices: list[str] = []
        for n, w, v in fields(pod):
            if w != 2:
                continue
            assert isinstance(v, bytes)
            if n == 1:
                name = v.decode()
            elif n == 2:
                namespace = v.decode()
            elif n == 3:
                for cn, cw, cv in fields(v):
                    if cn == 2 and cw == 2 and isinstance(cv, bytes):
                        devices += [d.decode() for dn, dw, d in fields(cv) if dn == 2 and isinstance(d, bytes)]
        pods.append(PodResources(namespace, name, tuple(devices)))
    return pods


# -- a unary gRPC call over HTTP/2 -------------------------------------------------------------------
def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _hpack_int(value: int, prefix_bits: int) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([value])
    out, value = bytearray([limit]), value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack_literal(name: str, value: str) -> bytes:
    """'Literal header field without indexing, new name', no Huffman coding."""
    n, v = name.encode(), value.encode()
    return b"\x00" + _hpack_int(len(n), 7) + n + _hpack_int(len(v), 7) + v


def grpc_unary(socket_path: str, method: str, request: bytes = b"", timeout: float = 2.0) -> bytes:
    """Call a unary gRPC method on a Unix socket; return the response message's bytes."""
    headers = b"".join(
        hpack_literal(k, v)
        for k, v in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", method),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        )
    )
    message = b"\x00" + len(request).to_bytes(4, "big") + request
    settings = (2).to_bytes(2, "big") + (0).to_bytes(4, "big")  # ENABLE_PUSH = 0
    settings += (4).to_bytes(2, "big") + (2**31 - 1).to_bytes(4, "big")  # INITIAL_WINDOW_SIZE: no flow control
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(socket_path)
        sock.sendall(
            PREFACE
            + _frame(SETTINGS, 0, 0, settings)
            + _frame(WINDOW_UPDATE, 0, 0, (2**31 - 1 - 65535).to_bytes(4, "big"))
            + _frame(HEADERS, END_HEADERS, 1, headers)
            + _frame(DATA, END_STREAM, 1, message)
        )
        body = bytearray()
        reader = _Reader(sock)
        while True:
            length, kind, flags, stream = reader.header()
            payload = reader.exact(length)
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(_frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                sock.sendall(_frame(PING, ACK, 0, payload))
            elif kind == GOAWAY or (kind == RST_STREAM and stream == 1):
                raise GrpcError(f"{method}: the server closed the stream")
            elif stream == 1 and kind == DATA:
                body += payload
            if stream == 1 and kind in (DATA, HEADERS) and flags & END_STREAM:
                break
    if len(body) < 5:
        raise GrpcError(f"{method}: no response message (gRPC error status?)")
    if body[0] != 0:
        raise GrpcError(f"{method}: compressed responses are not supported")
    size = int.from_bytes(body[1:5], "big")
    return bytes(body[5 : 5 + size])


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise GrpcError("connection closed")
            buf += chunk
        return bytes(buf)

    def header(self) -> tuple[int, int, int, int]:
        raw = self.exact(9)
        return int.from_bytes(raw[:3], "big"), raw[3], raw[4], int.from_bytes(raw[5:9], "big") & 0x7FFFFFFF


class PodResourcesNames:
    """discovery.PodNames over the kubelet's pod-resources socket, with a short cache."""

    def __init__(self, socket_path: str, ttl_s: float = 15.0) -> None:
        self.socket_path = socket_path
        self.ttl_s = ttl_s
        self._pods: list[PodResources] = []
        self._at = -1e9
        self._lock = threading.Lock()

    def pods(self) -> list[PodResources]:
        with self._lock:
            if time.monotonic() - self._at > self.ttl_s:
                self._pods = parse_list_response(grpc_unary(self.socket_path, LIST_METHOD))
                self._at = time.monotonic()
            return self._pods

    def lookup(self, uid: str, name_hint: str) -> tuple[str, str] | None:
        if not name_hint:
            return None
        matches = {(p.namespace, p.name) for p in self.pods() if p.name == name_hint}
        if len(matches) != 1:
            self._at = -1e9 if not matches else self._at  # maybe a new pod: list again next time
            return None
        return next(iter(matches))
