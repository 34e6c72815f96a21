"""A fault-injecting HTTP proxy on 127.0.0.1 in front of the moto S3 server.

lakequery talks to it through ``storage_options={"endpoint_url": proxy.url, ...}``. For
each request the proxy decides, with a seeded RNG, whether to inject a fault and which:

* ``error500`` / ``error503`` / ``slowdown``: answer with an S3 XML error without
  forwarding (nothing happened on the server);
* ``error500_after``: forward, then answer 500 instead of the real answer (the server
  did the work: a PUT stored its object, a DELETE deleted);
* ``drop_before``: close the connection without forwarding;
* ``drop_after``: forward, then close the connection without answering (a lost answer);
* ``delay``: wait a little, then forward normally;
* ``truncate``: forward, send the real headers (with the full ``Content-Length``) but only
  half of the body, then close.

Requests are classified by kind: ``GET``, ``LIST`` (GET on the bucket), ``HEAD``, ``PUT``,
``DELETE`` (DELETE and the bulk ``POST ?delete``) and ``POST`` (multipart uploads).

Besides random faults, a *rule* can inject one fault deterministically (``once``: the
first request of a kind whose path matches), and *crash mode* kills the store at request
``k``: request ``k`` is dropped before (``before``) or after (``after``) forwarding it, and
every later request is dropped too, as if the writer process had died at that moment.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULTS = (
    "error500",
    "error503",
    "slowdown",
    "error500_after",
    "drop_before",
    "drop_after",
    "delay",
    "truncate",
)
KINDS = ("GET", "LIST", "HEAD", "PUT", "DELETE", "POST")
#: Request kinds whose answers have a body worth truncating.
BODIES = ("GET", "LIST")

_ERRORS = {
    "error500": (500, "InternalError", "We encountered an internal error. Please try again."),
    "error500_after": (500, "InternalError", "We encountered an internal error."),
    "error503": (503, "ServiceUnavailable", "Please reduce your request rate."),
    "slowdown": (503, "SlowDown", "Please reduce your request rate."),
}


@dataclass
class Rule:
    """Inject ``fault`` into the first ``count`` requests of ``kind`` whose path matches."""

    kind: str
    path_regex: str
    fault: str
    count: int = 1
    fired: int = 0


@dataclass
class FaultPlan:
    """What to inject: per-kind rates, the faults to pick from, rules, crash point."""

    seed: int = 0
    rates: dict[str, float] = field(default_factory=dict)
    faults: tuple[str, ...] = FAULTS
    rules: list[Rule] = field(default_factory=list)
    delay_s: float = 0.05
    crash_at: int | None = None
    crash_when: str = "before"


class FaultProxy:
    """The proxy; start with :func:`running_proxy`. Counters are thread safe."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.plan = FaultPlan()
        self.rng = random.Random(0)
        self.lock = threading.Lock()
        self.injected: Counter[tuple[str, str]] = Counter()
        self.requests: Counter[str] = Counter()
        #: Faults injected since the proxy started, by (kind, fault); never reset.
        self.total_injected: Counter[tuple[str, str]] = Counter()
        self.total_requests = 0
        self.log: list[tuple[str, str, str]] = []  # (kind, path, fault or "")
        self.seen = 0
        self.dead = False
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def configure(self, plan: FaultPlan) -> None:
        """Start a new plan: counters, RNG and crash state are reset."""
        with self.lock:
            self.plan = plan
            self.rng = random.Random(plan.seed)
            self.injected = Counter()
            self.requests = Counter()
            self.log = []
            self.seen = 0
            self.dead = False

    def quiet(self) -> None:
        """No faults from now on (for checking results through the same endpoint)."""
        self.configure(FaultPlan())

    def decide(self, kind: str, path: str) -> str:
        """Return the fault for one request (``""`` for none) and count it."""
        with self.lock:
            plan = self.plan
            self.requests[kind] += 1
            self.seen += 1
            fault = ""
            if self.dead:
                fault = "dead"
            elif plan.crash_at is not None and self.seen == plan.crash_at:
                fault = "drop_after" if plan.crash_when == "after" else "drop_before"
                self.dead = True
            else:
                for rule in plan.rules:
                    if (
                        rule.kind == kind
                        and rule.fired < rule.count
                        and re.search(rule.path_regex, path)
                    ):
                        rule.fired += 1
                        fault = rule.fault
                        break
                else:
                    rate = plan.rates.get(kind, 0.0)
                    if rate and self.rng.random() < rate:
                        choices = [f for f in plan.faults if f != "truncate" or kind in BODIES]
                        fault = self.rng.choice(choices)
            self.total_requests += 1
            if fault:
                self.injected[(kind, fault)] += 1
                self.total_injected[(kind, fault)] += 1
            self.log.append((kind, path, fault))
            return fault


def _kind(method: str, path: str) -> str:
    parts = urlsplit(path)
    if method == "POST":
        return "DELETE" if "delete" in parts.query.split("&") else "POST"
    if method == "GET" and ("list-type" in parts.query or parts.path.strip("/").count("/") == 0):
        return "LIST"
    return method


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _drop(self) -> None:
            self.close_connection = True
            with suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _error(self, status: int, code: str, message: str) -> None:
            body = (
                f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>{message}</Message><RequestId>fault</RequestId></Error>"
            ).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":  # a HEAD answer has no body, whatever its length
                self.wfile.write(body)

        def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
            conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=30)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, resp.getheaders(), data
            finally:
                conn.close()

        def _reply(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response(status)
            head = self.command == "HEAD"
            for k, v in headers:
                name = k.lower()
                if name in ("connection", "transfer-encoding", "date"):
                    continue
                if name == "content-length" and not head:
                    continue
                self.send_header(k, v)
            if not head:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _handle(self) -> None:
            body = self._body()
            kind = _kind(self.command, self.path)
            fault = proxy.decide(kind, self.path)
            if fault in ("dead", "drop_before"):
                return self._drop()
            if fault in ("error500", "error503", "slowdown"):
                return self._error(*_ERRORS[fault])
            if fault == "delay":
                time.sleep(proxy.plan.delay_s)
            status, headers, data = self._forward(body)
            if fault == "drop_after":
                return self._drop()
            if fault == "error500_after":
                return self._error(*_ERRORS[fault])
            if fault == "truncate" and self.command != "HEAD" and len(data) > 1:
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in ("connection", "transfer-encoding", "date"):
                        self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                return self._drop()
            return self._reply(status, headers, data)

        do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _handle

    return Handler


@contextmanager
def running_proxy(upstream: str) -> Iterator[FaultProxy]:
    """Run a :class:`FaultProxy` for ``upstream`` on a free loopback port."""
    proxy = FaultProxy(upstream)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    proxy.server = server
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
