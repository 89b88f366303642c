"""Unit constants and the only unit conversions of the package.

Inside the package: seconds, bytes, bytes/s, FLOP/s, tokens, requests/s. The paper quotes KV
sizes in MiB (2^20 bytes) and link rates in Gbps (10^9 bit/s); people type thousands of tokens
as "19.4K" (10^3 tokens). Each conversion is one tested function here; no other module
multiplies by 8, 1e9, 2**20 or 1000 to change units.
"""

BITS_PER_BYTE = 8
GIGA = 10**9
MEBI = 2**20
GIBI = 2**30
KILO = 10**3
MILLI = 10**-3
TERA = 10**12


def gbps_to_bytes_per_s(gbps):
    """Gbps (10^9 bit/s) -> bytes/s."""
    return gbps * GIGA / BITS_PER_BYTE


def bytes_per_s_to_gbps(bytes_per_s):
    """bytes/s -> Gbps (10^9 bit/s)."""
    return bytes_per_s * BITS_PER_BYTE / GIGA


def mib_to_bytes(mib):
    """MiB (2^20 bytes) -> bytes."""
    return mib * MEBI


def bytes_to_mib(n_bytes):
    """bytes -> MiB (2^20 bytes)."""
    return n_bytes / MEBI


def gib_to_bytes(gib):
    """GiB (2^30 bytes) -> bytes."""
    return gib * GIBI


def gb_to_bytes(gb):
    """GB (10^9 bytes, as on GPU datasheets) -> bytes."""
    return gb * GIGA


def tbytes_per_s_to_bytes_per_s(tb_per_s):
    """TB/s (10^12 bytes/s, datasheet memory bandwidth) -> bytes/s."""
    return tb_per_s * TERA


def tflops_to_flops(tflops):
    """TFLOP/s (10^12) -> FLOP/s."""
    return tflops * TERA


def ms_to_s(ms):
    """milliseconds -> seconds."""
    return ms * MILLI


def s_to_ms(s):
    """seconds -> milliseconds."""
    return s / MILLI


def tokens_to_ktokens(tokens):
    """tokens -> thousands of tokens (the paper's "19.4K")."""
    return tokens / KILO


def ktokens_to_tokens(ktokens):
    """thousands of tokens -> tokens."""
    return ktokens * KILO
