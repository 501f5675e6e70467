"""The simulator's live /metrics endpoint: the same fleet, evaluated at the wall-clock time."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .engine import FleetSimulation
from .exposition import text_exposition


def serve(sim: FleetSimulation, host: str, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/metrics":
                body = text_exposition(sim, time.time() - sim.sc.t0).encode()
                ctype = "text/plain; version=0.0.4; charset=utf-8"
            elif self.path == "/healthz":
                body, ctype = b"ok\n", "text/plain"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    ThreadingHTTPServer((host, port), Handler).serve_forever()
