#!/usr/bin/python3
"""Writes the man page isometryd.toml(5) from docs/reference/config.md.

    config_man.py CONFIG_MD VERSION OUT

The page is the reference's text and its key table, turned into roff: so
the man page says what the reference says (and docs_check holds the
reference to the keys the parser accepts). Standard library only; the
build runs it (systemd/CMakeLists.txt).
"""

import re
import sys


def roff(text):
    """Inline Markdown to roff: code bold, links as their text, escapes."""
    text = text.replace("\\|", "|").replace("\\", "\\e")
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", text)
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    text = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"\\fI\1\\fR", text)
    text = text.replace("-", "\\-")
    return text


def line(text):
    """One output line: roff must not see a leading dot or quote as a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def main():
    src, version, out = sys.argv[1], sys.argv[2], sys.argv[3]
    lines = open(src, encoding="utf-8").read().split("\n")
    body, in_table, fenced = [], False, False
    for raw in lines[1:]:
        if raw.startswith("```"):
            fenced = not fenced
            body.append(".nf" if fenced else ".fi")
            continue
        if fenced:
            body.append(line(raw.replace("\\", "\\e")))
            continue
        if (raw.startswith("*For ") and raw.endswith("*")) or "is written from this page" in raw:
            continue  # the page's lines for the web reader
        if raw.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", raw.strip())[1:-1]]
            if not in_table:
                in_table = True
                body.append(".SH KEYS")
                continue  # the header row
            if all(re.fullmatch(r"-+", c) for c in cells):
                continue
            key, default, meaning = (cells + ["", "", ""])[:3]
            body.append(".TP")
            body.append(line(roff(key) + (f" (default: {roff(default)})" if default not in
                                          ("", "—") else "")))
            body.append(line(roff(meaning)))
            continue
        in_table = False
        if raw.startswith("#"):
            body.append(".SH " + roff(raw.lstrip("#").strip()).upper())
        elif not raw.strip():
            body.append(".PP")
        elif raw.startswith("- "):
            body.append(".IP \\(bu 2")
            body.append(line(roff(raw[2:])))
        else:
            body.append(line(roff(raw.strip())))
    page = [
        f'.TH ISOMETRYD.TOML 5 "" "isometry {version}" "File Formats"',
        ".SH NAME",
        "isometryd.toml \\- configuration file of isometryd",
        ".SH SYNOPSIS",
        "/etc/isometry/isometryd.toml",
        ".SH DESCRIPTION",
    ] + body + [
        ".SH SEE ALSO",
        ".BR isometryd (8),",
        ".BR isoctl (1).",
        "The same reference, with links, is docs/reference/config.md under",
        "the installed documentation directory.",
    ]
    # Collapse paragraph marks that follow a section or another mark.
    result = []
    for l in page:
        if l == ".PP" and result and (result[-1].startswith(".SH") or result[-1] == ".PP"):
            continue
        result.append(l)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(result) + "\n")


if __name__ == "__main__":
    main()
