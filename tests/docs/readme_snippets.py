#!/usr/bin/python3
"""Writes README.md's quick-start programs out as files a test runs.

    readme_snippets.py README.md OUTDIR

OUTDIR/readme_copy.py is the first ```python block and OUTDIR/readme_copy.cc
the first ```cpp block of README.md (whatever their info strings add, such
as `run`), each with the daemon's default socket replaced by the private
daemon's (tests/run_with_daemon.sh exports
ISOMETRY_SOCKET and ISOMETRY_LOCAL_SOCKET). Fails, naming what it missed,
when a block or the socket path in it is not there: README's quick start
(README.md, "Quick start") must stay a program that runs.
"""

import os
import re
import sys


def block(text, lang):
    m = re.search(r"^```" + lang + r"\b[^\n]*\n(.*?)^```", text, re.S | re.M)
    if not m:
        sys.exit(f"readme_snippets: README.md has no ```{lang} block")
    return m.group(1)


def replace_once(code, old, new, what):
    if old not in code:
        sys.exit(f"readme_snippets: the {what} block no longer names {old}")
    return code.replace(old, new)


def main():
    readme, out = sys.argv[1], sys.argv[2]
    text = open(readme, encoding="utf-8").read()
    os.makedirs(out, exist_ok=True)
    py = replace_once(block(text, "python"), '"/run/isometry/grpc.sock"',
                      'os.environ["ISOMETRY_SOCKET"]', "python")
    cc = replace_once(block(text, "cpp"), '"/run/isometry/isometry.sock"',
                      'std::getenv("ISOMETRY_LOCAL_SOCKET")', "cpp")
    files = {"readme_copy.py": "import os\n" + py,
             "readme_copy.cc": "#include <cstdlib>\n" + cc}
    for name, code in files.items():
        path = os.path.join(out, name)
        # Rewrite only on change, so a configure does not rebuild the program.
        if not os.path.exists(path) or open(path, encoding="utf-8").read() != code:
            with open(path, "w", encoding="utf-8") as f:
                f.write(code)


if __name__ == "__main__":
    main()
