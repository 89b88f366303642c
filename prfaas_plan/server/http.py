"""The HTTP protocol `serve` runs uvicorn with: uvicorn's httptools protocol, with a bound on
each request's head (Limits.max_head_bytes, Limits.max_headers), which neither uvicorn nor
httptools sets (httptools joins a header's pieces as they arrive, however many there are).

The head is counted twice: exactly as the parser hands it over (the URL as it arrives, each
header line once complete: name, value and 4 bytes of ": " and CRLF), and as received bytes
while a head is still open, so that one endless header line is refused after at most
max_head_bytes and one read, not once it ends. A request over either bound is answered 431 with
the API's one-line JSON error, before anything reaches the application, after the answers to
the requests before it on the connection (HTTP/1.1 answers in order); then the connection is
closed, lingering a moment so that the client can read the 431. Measured on /plan
(bench_serve.py, 2 alternated runs each): the HTTP process's CPU a request did not move
(0.27-0.30 ms, 0.30-0.31 before)."""

import asyncio
import json
import logging
from array import array
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from prfaas_plan.server.limits import Limits, head_refusal

LOG = logging.getLogger("uvicorn.error")
LINGER_S = 2.0  # after a 431, what the client still sends is read and dropped this long...
LINGER_BYTES = 1 << 20  # ...up to this many bytes


class _HeadTooLargeError(Exception):
    """Raised from a parser callback to stop parsing a refused head."""


class _Parser(httptools.HttpRequestParser):
    """httptools' parser, whose callbacks may refuse a head: parsing stops without the
    parser's own 400 (the protocol answers 431)."""

    def __init__(self, protocol: "BoundedHttpToolsProtocol") -> None:
        super().__init__(protocol)
        self.protocol = protocol

    def feed_data(self, data: "bytes | bytearray | memoryview | array[int]") -> None:
        try:
            super().feed_data(data)
        except httptools.HttpParserError:
            if self.protocol.refusal is None:
                raise


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head bounded by `limits` (set on a subclass by
    `bounded_protocol`)."""

    limits = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parser = _Parser(self)
        leniencies = getattr(self.parser, "set_dangerous_leniencies", None)
        if leniencies is not None:  # as uvicorn sets them on its own parser
            leniencies(lenient_data_after_close=True)
        self.refusal: str | None = None  # why this connection's next request is refused
        self.refused = False  # its 431 is written
        self.dropped = 0  # bytes received after the refusal
        self.head_open = True  # a request's head is being read: its bytes are counted
        self.head_received = 0  # bytes received while it is open
        self.head_bytes = 0  # the URL and the complete header lines so far, as parsed
        self.header_lines = 0

    # the head as received
    def data_received(self, data: bytes) -> None:
        if self.refusal is not None:  # refused: what follows is read and dropped
            self._drop(len(data))
            return
        if self.head_open:
            self.head_received += len(data)
        super().data_received(data)
        if self.refusal is None and self.head_open:
            self.refusal = head_refusal(self.limits, self.head_received, self.header_lines)
        if self.refusal is not None:
            self._refuse_in_turn()

    # the head as parsed
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_bytes = self.header_lines = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._count(len(url), 0)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4, 1)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.head_open = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.head_open, self.head_received = True, 0  # the next request's head

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.refusal is not None:
            self._refuse_in_turn()

    def _count(self, size: int, lines: int) -> None:
        self.head_bytes += size
        self.header_lines += lines
        self.refusal = head_refusal(self.limits, self.head_bytes, self.header_lines)
        if self.refusal is not None:
            raise _HeadTooLargeError

    def _refuse_in_turn(self) -> None:
        """The 431, after the answers to the requests before it on this connection (HTTP/1.1
        answers in order): now if none is pending, else when the last one is written."""
        pending = self.pipeline or (self.cycle is not None and not self.cycle.response_complete)
        if self.refused or pending or self.transport.is_closing():
            return
        self.refused = True
        message = self.refusal or ""
        LOG.warning("%s refused (431): %s", _peer(self.client), message)
        body = json.dumps({"error": {"type": "HeadersTooLarge", "message": message}}).encode()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n"
            b"connection: close\r\n\r\n" + body
        )
        # a lingering close: our side shut, what the client still sends read and dropped for a
        # while, so that the kernel does not reset the connection (losing the 431) over unread
        # bytes
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.flow.resume_reading()
        self.loop.call_later(LINGER_S, self.transport.close)

    def _drop(self, size: int) -> None:
        self.dropped += size
        if self.dropped > LINGER_BYTES:
            self.transport.close()


def _peer(client: tuple[str, int] | None) -> str:
    return "a request" if client is None else f"a request from {client[0]}:{client[1]}"


def bounded_protocol(limits: Limits) -> type[asyncio.Protocol]:
    """The protocol class uvicorn.run(http=...) takes, bounding heads by `limits`."""
    return type("BoundedHttpToolsProtocol", (BoundedHttpToolsProtocol,), {"limits": limits})
