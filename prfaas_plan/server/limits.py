"""What one request to the server may cost, and how many run at once (kept free of FastAPI so
the CLI can show the defaults without loading it)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one request may cost, and how many run at once."""

    max_body_bytes: int = 256 * 1024  # a scenario is ~1 KB; a histogram of 10^4 bins ~200 KB
    max_json_depth: int = 32  # a scenario nests 4 deep
    max_concurrent: int = 4  # requests computing at once (2 cores)
    max_queued: int = 64  # requests waiting for one of them; more are answered 503
    timeout_s: float = 30.0  # per request; the bounded /simulate takes ~1 s
    # a request's head (request line and headers), read before the application sees anything:
    # browsers and curl send under 2 KiB, a cookie at most 4 KiB; 16 KiB is Node's default
    # (--max-http-header-size) and twice nginx's header-line buffer, 100 lines Apache's
    # LimitRequestFields. Beyond either the answer is 431 and the connection is closed, before
    # the rest is read (server/http.py; uvicorn and httptools set no bound of their own)
    max_head_bytes: int = 16 * 1024
    max_headers: int = 100
    # a body must arrive within body_timeout_s of the request's head (a 256 KiB body takes
    # 0.2 s at 10 Mbit/s), else 408: a client that stalls holds no memory for longer; and the
    # bodies being received at once hold at most max_buffered_body_bytes in all (a few hundred
    # maximal bodies), beyond which a new body is answered 503 at once
    body_timeout_s: float = 10.0
    max_buffered_body_bytes: int = 64 * 1024 * 1024


def head_refusal(limits: Limits, head_bytes: int, headers: int) -> str | None:
    """Why a request head of `head_bytes` (the URL and the header lines, as sent) with
    `headers` header lines is refused, or None."""
    if headers > limits.max_headers:
        return f"request: more than {limits.max_headers} header lines; send fewer headers"
    if head_bytes > limits.max_head_bytes:
        return (
            f"request: the request line and headers are over {limits.max_head_bytes:,} bytes; "
            "send fewer or shorter headers"
        )
    return None
