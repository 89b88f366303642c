"""The points of a sweep, generated block by block (GENERATION_BLOCK points at a time) from the
sweep file alone, so that memory does not grow with the study: a 10^7-point study never holds
its points, only a block and, for a Latin hypercube, its permutations.

- Grid: point g is the mixed-radix number g over the axes' value counts, the last axis the
  fastest (the order of `itertools.product`); each value is computed from its index, so no axis
  is held as a list either.
- Random: one numpy Generator (PCG64) seeded with `seed`, drawn a block of rows (samples x axes
  uniforms) at a time: the same stream, so the same points, as one draw of every sample.
- Latin hypercube: scipy's `qmc.LatinHypercube(d, seed=seed).random(n)` (scrambled, strength 1)
  reproduced exactly: sample i of axis j is (perm_j[i] - jitter[i, j]) / n, where the jitter is
  the generator's first n x d uniforms (drawn block by block) and perm_j the j-th of the d
  shuffles of 1..n drawn after them (a second generator from the same seed, advanced past the
  jitter). The permutations need all samples at once: they are held whole, 4 bytes per sample
  and axis, bounded by plausible.MAX_LATIN_HYPERCUBE_CELLS (checked when the sweep file is read).
"""

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

# points generated at once: the cost of a block's arrays is spread over 4,096 points and a
# block's dicts are a few MB at most
GENERATION_BLOCK = 4096
LATIN_HYPERCUBE_BYTES_PER_CELL = 4  # an int32 entry of one axis's permutation


class Axis(Protocol):
    def count(self) -> int: ...

    def grid_values(self, index: np.ndarray) -> list[Any]: ...

    def at(self, u: np.ndarray) -> list[Any]: ...


Columns = list[list[Any]]  # one list of values per axis, a block's points


def grid_blocks(axes: Sequence[Axis]) -> Iterator[Columns]:
    counts = [axis.count() for axis in axes]
    total = int(np.prod(counts, dtype=object))
    for start in range(0, total, GENERATION_BLOCK):
        ids = np.arange(start, min(start + GENERATION_BLOCK, total), dtype=np.int64)
        index = np.unravel_index(ids, counts)
        yield [axis.grid_values(i) for axis, i in zip(axes, index, strict=True)]


def random_blocks(axes: Sequence[Axis], samples: int, seed: int) -> Iterator[Columns]:
    rng = np.random.default_rng(seed)
    for start in range(0, samples, GENERATION_BLOCK):
        u = rng.random((min(GENERATION_BLOCK, samples - start), len(axes)))
        yield [axis.at(u[:, j]) for j, axis in enumerate(axes)]


def latin_hypercube_permutations(samples: int, dimensions: int, seed: int) -> np.ndarray:
    """scipy's permutations of 1..samples, one row per axis (int32), drawn after the jitter."""
    rng = np.random.default_rng(seed)
    # past the jitter: one 64-bit draw a double (PCG64, default_rng's generator, can advance)
    rng.bit_generator.advance(samples * dimensions)  # type: ignore[attr-defined]
    perms = np.tile(np.arange(1, samples + 1, dtype=np.int32), (dimensions, 1))
    for row in perms:
        rng.shuffle(row)
    return perms


def latin_hypercube_blocks(axes: Sequence[Axis], samples: int, seed: int) -> Iterator[Columns]:
    d = len(axes)
    perms = latin_hypercube_permutations(samples, d, seed)
    jitter = np.random.default_rng(seed)
    for start in range(0, samples, GENERATION_BLOCK):
        stop = min(start + GENERATION_BLOCK, samples)
        u = (perms[:, start:stop].T - jitter.uniform(size=(stop - start, d))) / samples
        yield [axis.at(u[:, j]) for j, axis in enumerate(axes)]
