"""A local HTTP server that answers every request with one JSON answer (or one per path) and keeps what it was asked:
a stand-in for slurmrestd, a Prometheus or an identity provider's discovery document in the tests of their clients."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class JsonServer:
    """`answer`: (status, JSON) for every request; `answers`: the same by path, before it."""

    def __init__(self) -> None:
        self.answer: tuple[int, Any] = (200, {})
        self.answers: dict[str, tuple[int, Any]] = {}
        self.asked: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                server.asked.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                     "form": parse_qs(body)})  # fmt: skip
                status, payload = server.answers.get(urlsplit(self.path).path, server.answer)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _reply

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def json_server() -> Iterator[JsonServer]:
    server = JsonServer()
    try:
        yield server
    finally:
        server.stop()
