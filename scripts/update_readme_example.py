"""Refresh the README's example blocks (`<!-- example:NAME -->` ... `<!-- /example -->`) from the
current output of the commands in EXAMPLES. tests/test_readme.py fails until this is run after a
change to a default result or its view.

    python scripts/update_readme_example.py
"""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
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
    "optimize-slo30-markdown": ["optimize", "examples/decode/case_study_slo30.yaml", "-f", "markdown"],
    "optimize-slo50-markdown": ["optimize", "examples/decode/case_study_slo50.yaml", "-f", "markdown"],
    "output-prefix-markdown": ["optimize", "examples/decode/output_and_prefix.yaml", "-f", "markdown"],
}  # fmt: skip


def output(args: list[str]) -> str:
    return subprocess.run(
        [sys.executable, "-m", "prfaas_plan", *args], capture_output=True, text=True,
        cwd=README.parent, check=True,
    ).stdout  # fmt: skip


def main() -> None:
    text = README.read_text()
    for name, args in EXAMPLES.items():
        start, end = f"<!-- example:{name} -->\n", "<!-- /example -->"
        block = re.escape(start) + ".*?" + re.escape(end)
        text = re.sub(
            block,
            lambda _, args=args, start=start, end=end: start + output(args) + end,
            text,
            flags=re.S,
        )
    README.write_text(text)


if __name__ == "__main__":
    main()
