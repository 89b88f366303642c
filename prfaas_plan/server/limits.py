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
