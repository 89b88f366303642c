"""Refresh the README's worked-example block from the current `prfaas-plan optimize` output.
tests/test_readme.py fails until this is run after a change to the default plan or its view.

    python scripts/update_readme_example.py
"""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- example:optimize-markdown -->\n", "<!-- /example -->"

output = subprocess.run(
    [sys.executable, "-m", "prfaas_plan", "optimize", "--format", "markdown"],
    capture_output=True, text=True, check=True,
).stdout  # fmt: skip
text = README.read_text()
updated = re.sub(
    re.escape(START) + ".*?" + re.escape(END), lambda _: START + output + END, text, flags=re.S
)
README.write_text(updated)
print("README example", "updated" if updated != text else "already current")
