"""Refresh the example blocks (`<!-- example:NAME -->` ... `<!-- /example -->`) of the README and
the docs/ pages from the current output of the commands in EXAMPLES: each block lives in one of
those documents (`documents()`), wherever it was put. tests/project/test_readme.py fails until this is
run after a change to a default result or its view.

    python scripts/update_readme_example.py
"""

import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"<!-- example:([\w-]+) -->\n(.*?)<!-- /example -->", re.S)


def documents() -> list[Path]:
    """The documents that may hold example blocks: the README and every docs/ page."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def blocks() -> dict[str, list[tuple[Path, str]]]:
    """Every example block of the documents: {name: [(document, text), ...]}."""
    found: dict[str, list[tuple[Path, str]]] = {}
    for path in documents():
        for name, text in BLOCK.findall(path.read_text()):
            found.setdefault(name, []).append((path, text))
    return found


EXAMPLES = {
    "optimize-markdown": ["optimize", "--format", "markdown"],
    "kv-markdown": ["kv", "--format", "markdown"],
    "egress-markdown": ["egress", "--format", "markdown"],
    "egress-scenario-markdown": [
        "egress", "--scenario", "examples/case_study.yaml", "--threshold-tokens", "19435",
        "--link-gbps", "10", "--format", "markdown",
    ],
    "check-markdown": ["check", "--format", "markdown"],
    "compare-markdown": ["compare-policies", "examples/case_study.yaml", "--format", "markdown"],
    "simulate-markdown": [
        "simulate", "examples/case_study.yaml", "--load", "0.5,0.8,0.95", "--requests", "100000",
        "--seed", "0", "--format", "markdown",
    ],
    "import-markdown": [
        "import-profile", "vllm", "examples/imports/vllm_h200_prefill.json",
        "--model", "internal-1t-hybrid", "--gpu", "h200", "--gpus-per-instance", "8",
        "--data-dir", "{data}", "--force", "--format", "markdown",
    ],
    "import-plan-markdown": ["optimize", "--data-dir", "{data}", "--format", "markdown"],
    "sensitivity-markdown": ["sensitivity", "--format", "markdown"],
    "explain-markdown": ["explain", "--format", "markdown"],
    "explain-decode-markdown": [
        "explain", "examples/decode/decode_bound.yaml", "--format", "markdown",
    ],
    "sensitivity-10gbps-markdown": [
        "sensitivity", "--bandwidth-gbps", "10", "--format", "markdown",
    ],
    "cost-twice-h20-markdown": [
        "evaluate", "--threshold-tokens", "19435", "--pd-prefill-instances", "3",
        "--gpu-price", "h200=2.4", "--format", "markdown",
    ],
    "paper-equal-cost-markdown": [
        "optimize", "--gpu-price", "h200=2", "--gpu-price", "h20=1",
        "--link-offering", "metro-wave-100g", "--format", "markdown",
    ],
    "procure-markdown": ["procure", "--target-rps", "4", "--format", "markdown"],
    "procure-ttft-markdown": [
        "procure", "--target-rps", "2", "--ttft-target-s", "8", "--format", "markdown",
    ],
    "optimize-slo30-markdown": ["optimize", "examples/decode/case_study_slo30.yaml", "-f", "markdown"],
    "optimize-slo50-markdown": ["optimize", "examples/decode/case_study_slo50.yaml", "-f", "markdown"],
    "output-prefix-markdown": ["optimize", "examples/decode/output_and_prefix.yaml", "-f", "markdown"],
    "prefix-bands-markdown": ["optimize", "examples/prefix_bands.yaml", "-f", "markdown"],
    "procure-pareto-markdown": ["procure", "--pareto", "--target-rps", "4", "--format", "markdown"],
}  # fmt: skip
# commands run first, for their effect, in the same fresh data directory
SETUP = {"import-plan-markdown": [EXAMPLES["import-markdown"]]}
DATA = "{data}"  # a fresh data directory (inside a new temporary one), shown as my-data


def example_output(name: str, run: Callable[[list[str]], str]) -> str:
    """What example `name` prints, `run(args)` giving a command's stdout; a `{data}` argument
    is a new data directory, named my-data in the text."""
    with tempfile.TemporaryDirectory() as scratch:
        data = str(Path(scratch) / "my-data")
        for setup in SETUP.get(name, []):
            run([data if a == DATA else a for a in setup])
        text = run([data if a == DATA else a for a in EXAMPLES[name]])
        return text.replace(data, "my-data")


def output(args: list[str]) -> str:
    return subprocess.run(
        [sys.executable, "-m", "prfaas_plan", *args], capture_output=True, text=True,
        cwd=README.parent, check=True,
    ).stdout  # fmt: skip


def main() -> None:
    shown = {name: example_output(name, output) for name in EXAMPLES}
    for path in documents():
        text = path.read_text()
        for name in EXAMPLES:
            start, end = f"<!-- example:{name} -->\n", "<!-- /example -->"
            block = re.escape(start) + ".*?" + re.escape(end)
            replacement = start + shown[name] + end
            text = re.sub(block, lambda _, r=replacement: r, text, flags=re.S)
        if text != path.read_text():
            path.write_text(text)


if __name__ == "__main__":
    main()
