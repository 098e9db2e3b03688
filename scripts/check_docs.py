#!/usr/bin/python3
"""Fails when the documentation and the code disagree about where things are.

Run from the repository root (ctest `docs_check` does), with the standard
library only. It checks:

  links      every relative link in README.md and docs/**/*.md names a file
             or folder that exists, and its #anchor a heading of that page
             (GitHub's anchors: lower case, punctuation dropped, spaces to -);
  citations  every `(docs/<page>.md, "Section")` or `(README, "Section")` in
             the tracked sources, tests, scripts and install files names an
             existing page and a heading of it, and every docs/<page>.md they
             mention otherwise exists (or a bold lead-in such as
             `**Byte by byte.**`); a name may stop before a heading's
             parenthesis or colon ("Direct reads" for "Direct reads (a
             peer's private memory, ...)");
  outside    no tracked file cites STYLE.md or ../shared/ (files that are
             not in the repository) instead of docs/development/style.md;
  config     every key the configuration parser accepts (config/*.cc:
             OnlyKeys lists, kDaemonKeys, and the sub-table parsers'
             `k.str() == "..."`) appears in docs/reference/config.md;
  metrics    the metric names the daemon serves (daemon/server/metrics*.cc)
             and the rows of docs/reference/metrics.md are the same set;
  cli        isoctl's subcommands (add_subcommand in tools/isoctl/*.cc) and
             the rows of docs/reference/cli.md's command table are the same;
  errors     docs/reference/errors.md's tables and the code agree: every
             status code the daemon, clients and tools return (core/status.h's
             helpers, absl::...Error, absl::StatusCode::k..., grpc::StatusCode::
             ... in non-test C++ sources) has a row, every row is such a code
             with its google.rpc.Code number; the exit-code rows are isoctl's
             ExitCode values (tools/isoctl/exit_codes.h), and so are the
             codes isoctl --help lists (kFooter, tools/isoctl/main.cc) and
             isoctl(1)'s EXIT STATUS (systemd/isoctl.h2m); the transfer-state
             rows are the states StateName (daemon/node/node_copies.cc) returns;
  machine    no tracked source file (code, scripts, build files) and no page
             outside docs/benchmarks/ speaks of "the development VM", "this
             VM" or "on the VM": what one machine measured belongs in
             docs/benchmarks/ (design-measurements.md), and a comment says
             why and cites it (MACHINE_EXCEPTIONS lists the files allowed).

Prints one line per problem and exits 1 when there is any, else prints a
summary and exits 0.
"""

import os
import re
import subprocess
import sys

ROOT = os.getcwd()
SOURCE_EXTS = (".cc", ".h", ".py", ".proto", ".txt", ".sh", ".toml", ".cmake", ".in",
               ".service", ".rules", ".h2m", ".json", ".conf")
SKIP_DIRS = ("build", ".git", "third_party")
# A line break inside a comment: the break, indentation and comment marker.
COMMENT_BREAK = re.compile(r"[ \t]*\n[ \t]*(?://+|#+|\*|;)?[ \t]*")


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        files = [f for f in out.splitlines() if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(ROOT):
            dirnames[:] = [d for d in dirnames if not d.startswith(SKIP_DIRS)]
            files += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in filenames]
    return [f for f in files if not f.startswith(SKIP_DIRS) and os.path.isfile(f)]


def strip_fences(text):
    """The page's lines with fenced code blocks blanked (kept for line numbers)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def anchor(heading):
    a = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return a.replace(" ", "-")


class Page:
    def __init__(self, path):
        self.path = path
        self.lines = strip_fences(open(path, encoding="utf-8").read())
        self.headings, self.anchors, self.labels = [], set(), []
        seen = {}
        for line in self.lines:
            m = re.match(r"#{1,6} +(.*?)\s*#*\s*$", line)
            if m:
                title = m.group(1)
                self.headings.append(title)
                a = anchor(title)
                n = seen.get(a, 0)
                seen[a] = n + 1
                self.anchors.add(a if n == 0 else f"{a}-{n}")
            m = re.match(r"\s*(?:[-*] )?\*\*([^*]+?)\.?\*\*", line)
            if m:
                self.labels.append(m.group(1).rstrip("."))

    def has_section(self, name):
        for title in self.headings + self.labels:
            plain = title.replace("`", "")
            for t in (title, plain):
                if t == name or t.startswith(name + " (") or t.startswith(name + ":"):
                    return True
        return False


_pages = {}


def page(path):
    path = os.path.normpath(path)
    if path not in _pages:
        _pages[path] = Page(path) if os.path.isfile(path) else None
    return _pages[path]


def markdown_files():
    files = ["README.md"]
    for dirpath, _, filenames in os.walk("docs"):
        files += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".md")]
    return files


def check_links(problems):
    count = 0
    for md in markdown_files():
        p = page(md)
        for no, line in enumerate(p.lines, 1):
            line = re.sub(r"`[^`]*`", "", line)
            for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
                target = m.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                    continue
                count += 1
                path, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                if not os.path.exists(dest):
                    problems.append(f"{md}:{no}: link to {target}: {dest} does not exist")
                    continue
                if frag and dest.endswith(".md") and frag not in page(dest).anchors:
                    problems.append(f"{md}:{no}: link to {target}: no heading #{frag} in {dest}")
    return count


DOC_NAME = re.compile(r"(?<![\w/.])(README(?:\.md)?|docs/[\w./-]+\.md)")
CITATION = re.compile(r"(README(?:\.md)?|docs/[\w./-]+\.md),? +\\?\"([^\"\\]{1,120})\\?\"")
SELF = "scripts/check_docs.py"


def check_citations(problems, files):
    count = 0
    for f in files:
        if not f.endswith(SOURCE_EXTS) and "/corpus/" not in f:
            continue
        if f.startswith("docs/") or f == "README.md" or f == SELF:
            continue
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for m in DOC_NAME.finditer(text):
            # The name may run over a comment's line break: read it joined.
            start = m.start()
            no = text.count("\n", 0, start) + 1
            chunk = COMMENT_BREAK.sub(" ", text[start:start + 400])
            j = CITATION.match(chunk)
            if not j:
                if m.group(1).startswith("docs/") and not os.path.isfile(m.group(1)):
                    count += 1
                    problems.append(f"{f}:{no}: names {m.group(1)}, which does not exist")
                continue
            doc, name = j.group(1), j.group(2).strip()
            count += 1
            target = "README.md" if doc.startswith("README") else doc
            p = page(target)
            if p is None:
                problems.append(f"{f}:{no}: cites {doc}, which does not exist")
            elif not p.has_section(name):
                problems.append(f"{f}:{no}: cites ({doc}, \"{name}\"): no such heading in {target}")
        for m in re.finditer(r"\(README,\s+(?:\w+ ){0,3}\w+\)", COMMENT_BREAK.sub(" ", text)):
            problems.append(f"{f}: cites {m.group(0)} without a quoted section name; "
                            "write (docs/<page>.md, \"Section\")")
        for m in re.finditer(r"(?<![\w/])STYLE\.md|\.\./shared/", text):
            no = text.count("\n", 0, m.start()) + 1
            problems.append(f"{f}:{no}: cites {m.group(0)}, which is outside the repository "
                            "(the style guide is docs/development/style.md)")
    return count


# google.rpc.Code (absl::StatusCode): name -> number.
RPC_CODES = {
    "OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12,
    "INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}


def camel_to_code(name):
    """"DeadlineExceeded" -> "DEADLINE_EXCEEDED"."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def code_statuses(files):
    """{code name: first file returning it} over the non-test C++ sources."""
    helpers = "|".join(n.title().replace("_", "") for n in RPC_CODES)
    pattern = re.compile(
        rf"(?<![\w:])(?:isometry::)?({helpers})\(|absl::(\w+)Error\(|"
        r"absl::StatusCode::k(\w+)|grpc::(?:StatusCode::)?([A-Z_]{2,})\b")
    found = {}
    for f in files:
        if not f.endswith((".cc", ".h")) or f.endswith("_test.cc"):
            continue
        if f.startswith(("tests/", "fuzz/", "tools/bench/")):
            continue
        text = open(f, encoding="utf-8").read()
        for m in pattern.finditer(text):
            if m.group(4):
                name = m.group(4)
            else:
                name = camel_to_code(m.group(1) or m.group(2) or m.group(3))
            if name in RPC_CODES:
                found.setdefault(name, f)
    found.setdefault("OK", "core/status.h")
    return found


def section_rows(lines, title):
    """The first cells of the table rows under the heading `title`."""
    cells, inside = [], False
    for line in lines:
        m = re.match(r"#{1,6} +(.*?)\s*$", line)
        if m:
            inside = m.group(1) == title
            continue
        m = re.match(r"\|((?:[^|\\]|\\.)*)\|", line)
        if inside and m and not re.match(r"\s*-+\s*$", m.group(1)):
            cells.append(m.group(1).strip())
    return cells[1:]  # the header row


def check_errors(problems, files):
    path = "docs/reference/errors.md"
    header = open("tools/isoctl/exit_codes.h", encoding="utf-8").read()
    exits = {int(v): k for k, v in re.findall(r"\b(kExit\w+) = (\d+)", header)}
    # The same codes in isoctl --help and in isoctl(1).
    main = open("tools/isoctl/main.cc", encoding="utf-8").read()
    footer = re.search(r"Exit codes:\n(.*?)\n\n", main, re.S)
    listed = {int(n) for n in re.findall(r"(?m)^ +(\d+)  ", footer.group(1))} if footer else set()
    man = open("systemd/isoctl.h2m", encoding="utf-8").read()
    status = re.search(r"\[EXIT STATUS\](.*?)(?:\n\[|$)", man, re.S)
    in_man = {int(n) for n in re.findall(r"\b(\d+) (?=[a-z])", status.group(1))} if status else set()
    for where, got in (("isoctl --help's Exit codes (tools/isoctl/main.cc)", listed),
                       ("isoctl(1)'s EXIT STATUS (systemd/isoctl.h2m)", in_man)):
        for v in sorted(set(exits) - got):
            problems.append(f"{where} does not list exit code {v} ({exits[v]})")
        for v in sorted(got - set(exits)):
            problems.append(f"{where} lists exit code {v}, which exit_codes.h does not define")
    if not os.path.isfile(path):
        problems.append(f"{path} does not exist: the error codes a user sees are undocumented")
        return 0
    lines = strip_fences(open(path, encoding="utf-8").read())
    # Status codes.
    code = code_statuses(files)
    docs = {}
    for cell in section_rows(lines, "Status codes"):
        m = re.match(r"`([A-Z_]+)` \((\d+)\)$", cell)
        if not m:
            problems.append(f"{path}: Status codes row '{cell}' is not `NAME` (number)")
            continue
        name, number = m.group(1), int(m.group(2))
        docs[name] = number
        if RPC_CODES.get(name) != number:
            problems.append(f"{path}: `{name}` ({number}): google.rpc.Code "
                            + (f"numbers it {RPC_CODES[name]}" if name in RPC_CODES
                               else "has no such code"))
    for name in sorted(set(code) - set(docs)):
        problems.append(f"{path}: {code[name]} returns {name}, but Status codes has no row for it")
    for name in sorted(set(docs) - set(code)):
        problems.append(f"{path}: Status codes has a row for {name}, which no source returns")
    # isoctl's exit codes.
    documented = set()
    for cell in section_rows(lines, "isoctl exit codes"):
        m = re.match(r"`(\d+)`$", cell)
        if m:
            documented.add(int(m.group(1)))
        else:
            problems.append(f"{path}: isoctl exit codes row '{cell}' is not `number`")
    for v in sorted(set(exits) - documented):
        problems.append(f"{path}: isoctl exits {v} ({exits[v]}, tools/isoctl/exit_codes.h), "
                        "but isoctl exit codes has no row for it")
    for v in sorted(documented - set(exits)):
        problems.append(f"{path}: isoctl exit codes has a row for {v}, which "
                        "tools/isoctl/exit_codes.h does not define")
    # Transfer states.
    source = open("daemon/node/node_copies.cc", encoding="utf-8").read()
    body = re.search(r"std::string StateName\(.*?\n\}", source, re.S)
    states = set(re.findall(r"\"(\w+)\"", body.group(0))) if body else set()
    if not states:
        problems.append("daemon/node/node_copies.cc: no StateName to read the transfer states from")
    shown = set()
    for cell in section_rows(lines, "Transfer states"):
        shown |= set(re.findall(r"`(\w+)`", cell))
    for s in sorted(states - shown):
        problems.append(f"{path}: a transfer can be `{s}` (StateName), but Transfer states "
                        "has no row for it")
    for s in sorted(shown - states):
        problems.append(f"{path}: Transfer states has a row for `{s}`, which StateName "
                        "never returns")
    return len(code) + len(exits) + len(states)


# Phrases that quote what one machine measured (words may run over a
# comment's line break), and the files allowed them.
_GAP = r"(?:[ \t]*\n[ \t]*(?://+|#+|\*|;)?[ \t]*|[ \t]+)"
MACHINE_PHRASE = re.compile(
    r"\b(?:development|dev|this|on" + _GAP + r"the|\d-(?:core|vCPU))" + _GAP + r"VM\b",
    re.IGNORECASE)
# This check names the phrases; README's stability matrix and performance
# table say on which machine each was run, as a matrix of where things ran must.
MACHINE_EXCEPTIONS = {SELF, "README.md"}


def check_machine_phrases(problems, files):
    count = 0
    for f in files:
        doc = f == "README.md" or (f.startswith("docs/") and f.endswith(".md"))
        if f in MACHINE_EXCEPTIONS or f.startswith("docs/benchmarks/"):
            continue
        if not doc and not f.endswith(SOURCE_EXTS):
            continue
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        count += 1
        for m in MACHINE_PHRASE.finditer(text):
            no = text.count("\n", 0, m.start()) + 1
            phrase = " ".join(COMMENT_BREAK.sub(" ", m.group(0)).split())
            problems.append(f"{f}:{no}: \"{phrase}\" quotes one machine; move the figure to "
                            "docs/benchmarks/design-measurements.md and cite it there "
                            "(docs/benchmarks/design-measurements.md, \"Section\")")
    return count


def parser_keys():
    """(prefix, key) for every key config/*.cc accepts."""
    keys = set()
    for name in sorted(os.listdir("config")):
        if not name.endswith(".cc") or name.endswith("_test.cc"):
            continue
        text = open(os.path.join("config", name), encoding="utf-8").read()
        for m in re.finditer(r"OnlyKeys\(\s*\*?\w+,\s*\"([\w.]*)\",\s*\{([^}]*)\}", text):
            keys |= {(m.group(1), k) for k in re.findall(r"\"(\w+)\"", m.group(2))}
        m = re.search(r"kDaemonKeys\[\] = \{([^}]*)\}", text)
        if m:
            keys |= {("daemon.", k) for k in re.findall(r"\"(\w+)\"", m.group(1))}
        prefix = re.search(r"StrCat\(\"([\w.]+\.)\", k\.str\(\)\)", text)
        if prefix:
            keys |= {(prefix.group(1), k) for k in re.findall(r"k\.str\(\) == \"(\w+)\"", text)}
    return keys


def check_config(problems):
    path = "docs/reference/config.md"
    text = open(path, encoding="utf-8").read()
    lines = text.split("\n")
    keys = parser_keys()
    tables = {p.rstrip(".") for p, _ in keys}
    count = 0
    for prefix, key in sorted(keys):
        if prefix == "" or f"{prefix}{key}" in {f"{t}." for t in ()} or f"{prefix}{key}" in tables:
            continue  # a table, not a key
        count += 1
        table = prefix.rstrip(".")
        if f"`{prefix}{key}`" in text or f"`{prefix}{key} " in text:
            continue
        # Rows of an array of tables name the table once: `[[memory]] name`, `kind`.
        row = [l for l in lines if (f"[[{table}]]" in l or f"[{table}]" in l)
               and re.search(rf"`(?:\[\[{table}\]\] )?{key}`", l)]
        if not row:
            problems.append(f"{path}: the parser accepts `{prefix}{key}` "
                            f"(config/), but this page does not mention it")
    return count


def first_cells(path):
    """The first cell of every table row of a page, header rows left out."""
    cells = []
    for line in strip_fences(open(path, encoding="utf-8").read()):
        m = re.match(r"\|((?:[^|\\]|\\.)*)\|", line)
        if m and not re.match(r"\s*-+\s*$", m.group(1)):
            cells.append(m.group(1))
    return cells


def check_metrics(problems):
    path = "docs/reference/metrics.md"
    code = set()
    for name in sorted(os.listdir("daemon/server")):
        if name.startswith("metrics") and name.endswith(".cc") and not name.endswith("_test.cc"):
            text = open(os.path.join("daemon/server", name), encoding="utf-8").read()
            code |= set(re.findall(r"\"((?:isometry|process)_[a-z0-9_]+)", text))
    docs = set()
    for cell in first_cells(path):
        docs |= set(re.findall(r"`((?:isometry|process)_[a-z0-9_]+)`", cell))
    for m in sorted(code - docs):
        problems.append(f"{path}: the daemon serves {m} (daemon/server/), but no row names it")
    for m in sorted(docs - code):
        problems.append(f"{path}: a row names {m}, which the daemon does not serve")
    return len(code)


def check_cli(problems):
    path = "docs/reference/cli.md"
    code = set()
    for name in sorted(os.listdir("tools/isoctl")):
        if name.endswith(".cc"):
            text = open(os.path.join("tools/isoctl", name), encoding="utf-8").read()
            code |= set(re.findall(r"add_subcommand\(\s*\"([\w-]+)\"", text))
    docs = set()
    for cell in first_cells(path):
        docs |= {words.split()[0] for words in re.findall(r"`([^`]+)`", cell)}
    for c in sorted(code - docs):
        problems.append(f"{path}: isoctl has the subcommand `{c}` (tools/isoctl/), "
                        "but no row names it")
    return len(code)


def main():
    os.chdir(ROOT)
    problems = []
    links = check_links(problems)
    citations = check_citations(problems, tracked_files())
    keys = check_config(problems)
    metrics = check_metrics(problems)
    commands = check_cli(problems)
    files = tracked_files()
    errors = check_errors(problems, files)
    scanned = check_machine_phrases(problems, files)
    for p in problems:
        print(p)
    if problems:
        print(f"check_docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_docs: {links} links, {citations} citations, {keys} config keys, "
          f"{metrics} metrics, {commands} isoctl subcommands and {errors} error codes and "
          f"states agree; "
          f"{scanned} files quote no machine's timing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
