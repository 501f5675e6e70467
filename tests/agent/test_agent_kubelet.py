"""The kubelet pod-resources lookup against a fake gRPC server on a Unix socket."""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetwatt_agent.kubelet import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    LIST_METHOD,
    PREFACE,
    SETTINGS,
    PodResources,
    PodResourcesNames,
    _frame,
    field_bytes,
    grpc_unary,
    hpack_literal,
    parse_list_response,
)


def encode_pods(pods: list[tuple[str, str, list[str]]]) -> bytes:
    out = b""
    for namespace, name, devices in pods:
        device = field_bytes(1, b"nvidia.com/gpu") + b"".join(field_bytes(2, d.encode()) for d in devices)
        container = field_bytes(1, b"main") + field_bytes(2, device)
        out += field_bytes(
            1, field_bytes(1, name.encode()) + field_bytes(2, namespace.encode()) + field_bytes(3, container)
        )
    return out


class FakeKubelet:
    """Answers v1.PodResourcesLister/List the way an HTTP/2 gRPC server does."""

    def __init__(self, path: str, response: bytes) -> None:
        self.path, self.response, self.paths = path, response, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while PREFACE not in buf or not self._request_done(buf[len(PREFACE) :]):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                self.paths.append(LIST_METHOD.encode() in buf)
                message = b"\x00" + len(self.response).to_bytes(4, "big") + self.response
                head = hpack_literal(":status", "200") + hpack_literal("content-type", "application/grpc")
                conn.sendall(
                    _frame(SETTINGS, 0, 0)
                    + _frame(HEADERS, END_HEADERS, 1, head)
                    + _frame(DATA, 0, 1, message[:7])  # split across frames, as servers may
                    + _frame(DATA, 0, 1, message[7:])
                    + _frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack_literal("grpc-status", "0"))
                )
                with contextlib.suppress(OSError):
                    conn.recv(100)  # our SETTINGS ack

    @staticmethod
    def _request_done(buf: bytes) -> bool:
        i = 0
        while i + 9 <= len(buf):
            length, kind, flags = int.from_bytes(buf[i : i + 3], "big"), buf[i + 3], buf[i + 4]
            if i + 9 + length > len(buf):
                return False
            if kind == DATA and flags & END_STREAM:
                return True
            i += 9 + length
        return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="fw", dir="/tmp"))  # Unix socket paths must be short
    yield d
    shutil.rmtree(d, ignore_errors=True)


PODS = [("ml", "trainer-0", ["GPU-aaa"]), ("ml", "infer-0", ["GPU-bbb::1"]), ("dev", "infer-0", ["GPU-ccc"])]


def test_grpc_call_returns_the_list(sock_dir: Path) -> None:
    server = FakeKubelet(str(sock_dir / "kubelet.sock"), encode_pods(PODS))
    try:
        pods = parse_list_response(grpc_unary(str(sock_dir / "kubelet.sock"), LIST_METHOD))
    finally:
        server.close()
    assert pods == [
        PodResources("ml", "trainer-0", ("GPU-aaa",)),
        PodResources("ml", "infer-0", ("GPU-bbb::1",)),
        PodResources("dev", "infer-0", ("GPU-ccc",)),
    ]
    assert server.paths == [True]


def test_lookup_by_unique_name_else_none(sock_dir: Path) -> None:
    server = FakeKubelet(str(sock_dir / "kubelet.sock"), encode_pods(PODS))
    try:
        names = PodResourcesNames(str(sock_dir / "kubelet.sock"))
        assert names.lookup("uid-1", "trainer-0") == ("ml", "trainer-0")
        assert names.lookup("uid-2", "infer-0") is None  # two namespaces have one: ambiguous
        assert names.lookup("uid-3", "") is None
    finally:
        server.close()


def test_no_kubelet_is_an_error_the_resolver_survives(sock_dir: Path) -> None:
    with pytest.raises(OSError):
        PodResourcesNames(str(sock_dir / "absent.sock")).lookup("uid", "trainer-0")
