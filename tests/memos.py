"""Emptying what the package memoises, so that a test comparing two paths (a batch and each
plan alone) computes each side from nothing: a value one path leaves behind (an interned
log-normal with the split constants, normaliser and mean that log_normal_rows.prepare wrote on
it, a mesh, a decode point) cannot be what the other path reads."""

import sys

# the package's memos that are plain dicts (module, name): the homogeneous splits, read traces
PLAIN_MEMOS = (
    ("prfaas_plan.solve.baselines", "_memo"),
    ("prfaas_plan.inputs.trace_stream", "_CACHE"),
)


def forget_memos() -> None:
    """Empty every functools cache of the package's loaded modules (interned distributions
    included: the next problem built gets new instances) and its plain-dict memos."""
    for name, module in list(sys.modules.items()):
        if name.startswith("prfaas_plan") and module is not None:
            for value in vars(module).values():
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()
    for name, attribute in PLAIN_MEMOS:
        module = sys.modules.get(name)
        if module is not None:
            getattr(module, attribute).clear()
