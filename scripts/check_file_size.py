#!/usr/bin/python3
"""Fails when a C++ source file grows past the size docs/development/style.md
allows (docs/development/style.md, "Things to avoid"): no source file over
~600 lines unless a comment says why it must be. A tracked .cc or .h file longer than LIMIT lines must carry, in its
first 40 lines, a comment starting "// Long file:" followed by the reason.
Functions are held to ~100 lines by clang-tidy's readability-function-size
(.clang-tidy), which scripts/tidy.sh runs.

Usage: scripts/check_file_size.py [REPO_ROOT]
Prints FILE: N lines (limit LIMIT) for each violation; exits 1 on any.
"""

import os
import subprocess
import sys

LIMIT = 620  # "~600": a few lines of slack before a file must be split
MARKER = "// Long file:"
HEAD_LINES = 40


def violation(path, lines):
    """The message for a file of `lines` (its text, split), or None."""
    if len(lines) <= LIMIT:
        return None
    for line in lines[:HEAD_LINES]:
        stripped = line.strip()
        if stripped.startswith(MARKER) and len(stripped) > len(MARKER) + 10:
            return None
    return (f"{path}: {len(lines)} lines (limit {LIMIT}); split it by role, "
            f"or say why it must be one file in a '{MARKER} <reason>' comment "
            f"in its first {HEAD_LINES} lines")


def main(root):
    files = subprocess.run(["git", "-C", root, "ls-files", "*.cc", "*.h"], check=True,
                           capture_output=True, text=True).stdout.split()
    bad = 0
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            message = violation(path, f.read().split("\n"))
        if message:
            print(message)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1
                  else os.path.join(os.path.dirname(__file__), "..")))
