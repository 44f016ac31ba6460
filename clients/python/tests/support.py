"""What the tests share: the stack's address and keys (from the environment the jest test
tests/e2e/python-client.test.ts sets), a recording proxy in front of the real gateway, and a
real PNG made with zlib."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import socketserver
import struct
import threading
import urllib.parse
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from tes_client import RetryOptions, TesClient


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        # Not a skip: these tests are meant to run against the stack the jest test starts.
        raise RuntimeError(f"{name} is not set: run these tests through tests/e2e/python-client.test.ts (npx jest)")
    return value


BASE_URL = env("TES_URL")
#: Fast retries and polls: the tests count requests, not seconds.
FAST_RETRY = RetryOptions(base_delay_seconds=0.05, max_delay_seconds=0.2)


def client(
    key_env: str = "TES_API_KEY",
    base_url: Optional[str] = None,
    *,
    retry: RetryOptions = FAST_RETRY,
    poll_interval_seconds: float = 0.2,
) -> TesClient:
    return TesClient(env(key_env), base_url or BASE_URL, poll_interval_seconds=poll_interval_seconds, retry=retry)


@dataclass
class Sent:
    method: str
    path: str
    idempotency_key: Optional[str]
    prefer: Optional[str]
    last_event_id: Optional[str]
    body: bytes
    #: The gateway's status, "lost" when the proxy threw the answer away, "canned" when it made one up.
    status: object = None


Canned = Tuple[int, Dict[str, str], bytes]

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade", "te", "trailer"}


class RecordingProxy:
    """A proxy in front of the real gateway that records every request and can misbehave as
    networks and old servers do: lose the answer of a request the gateway applied
    (``lose_answer``), answer for the gateway (``canned``: a 429 or a 503), have no event
    stream (``no_stream``: the 404 of a gateway without the route) or ignore ``Prefer``
    (``ignore_prefer``), or hold an event stream back until it ends, as a buffering proxy
    does (``hold_streams``). Otherwise event streams pass through as they come."""

    def __init__(self) -> None:
        self.sent: List[Sent] = []
        self.lose_answer: Callable[[Sent], bool] = lambda s: False
        self.canned: Callable[[Sent], Optional[Canned]] = lambda s: None
        self.no_stream = False
        self.ignore_prefer = False
        self.hold_streams = False
        upstream = urllib.parse.urlsplit(BASE_URL)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                proxy._handle(self, upstream.hostname or "127.0.0.1", upstream.port or 80)

            do_POST = do_GET

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def requests(self, method: str, path_prefix: str) -> List[Sent]:
        return [s for s in self.sent if s.method == method and s.path.startswith(path_prefix)]

    def _handle(self, h: http.server.BaseHTTPRequestHandler, host: str, port: int) -> None:
        length = int(h.headers.get("content-length") or 0)
        body = h.rfile.read(length) if length else b""
        s = Sent(h.command, h.path, h.headers.get("idempotency-key"), h.headers.get("prefer"), h.headers.get("last-event-id"), body)
        self.sent.append(s)
        h.close_connection = True
        canned = self.canned(s)
        if canned is None and self.no_stream and h.path.split("?")[0].endswith("/events"):
            envelope = {"error": {"status": "NOT_FOUND", "message": "route_not_found"}}
            canned = (404, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(envelope).encode())
        if canned is not None:
            s.status = "canned"
            status, headers, data = canned
            h.send_response(status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            return
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP and k.lower() != "host"}
        if self.ignore_prefer:
            headers = {k: v for k, v in headers.items() if k.lower() != "prefer"}
        conn = http.client.HTTPConnection(host, port, timeout=120)
        try:
            conn.request(h.command, h.path, body=body or None, headers=headers)
            res = conn.getresponse()
            s.status = res.status
            streaming = (res.headers.get("content-type") or "").startswith("text/event-stream")
            data = b"" if streaming and not self.hold_streams else res.read()
            if self.lose_answer(s):
                s.status = "lost"
                return  # the gateway applied it; the caller sees the connection close
            h.send_response(res.status)
            for k, v in res.headers.items():
                if k.lower() in _HOP or (self.ignore_prefer and k.lower() == "preference-applied"):
                    continue
                h.send_header(k, v)
            if not streaming or self.hold_streams:
                h.send_header("Content-Length", str(len(data)))
                h.end_headers()
                h.wfile.write(data)
                return
            # HTTP/1.0 answer without a length: the body is everything until the close.
            h.end_headers()
            h.wfile.flush()
            while True:
                chunk = res.read1(65536)
                if not chunk:
                    break
                h.wfile.write(chunk)
                h.wfile.flush()
        except (OSError, http.client.HTTPException):
            return
        finally:
            conn.close()


def error_answer(status: int, error_status: str, code: str, headers: Optional[Dict[str, str]] = None) -> Canned:
    """An answer in the gateway's error envelope, with the headers it sends."""
    body = json.dumps({"error": {"status": error_status, "message": code}}).encode()
    return (status, {"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store", "X-Request-Id": "req_canned", **(headers or {})}, body)


def png(width: int = 48, height: int = 32) -> bytes:
    """A real RGB PNG (a gradient), written with zlib: signature, IHDR, IDAT, IEND."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(
        b"\x00" + bytes(v for x in range(width) for v in (x * 255 // width, y * 255 // height, 128)) for y in range(height)
    )
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
