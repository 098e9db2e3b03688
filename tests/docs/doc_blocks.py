#!/usr/bin/python3
"""Runs the code blocks of the guides and README that are marked runnable.

    doc_blocks.py --isometryd BIN --isoctl BIN --pythonpath DIR --cpp-dir DIR PAGE_OR_DIR...
    doc_blocks.py --write-cpp DIR PAGE_OR_DIR...

Every fenced block of a runnable language (toml, python, sh, bash, cpp) says
in its info string whether it runs; GitHub shows the first word as the
language:

  <language> run [node] [file=NAME] [needs=native]
  <language> norun: REASON          (why it cannot run here: a GPU, root, ...)

A block of those languages with neither fails the test, so a new block must
choose. Per page, in document order:

  toml run [node]    a piece of that node's configuration. Each node of the
                     page (the node names of its toml blocks; one unnamed
                     node when there are none) is a private isometryd whose
                     config is the test [daemon] section (sockets and state
                     in a temporary directory), the block's [daemon] keys,
                     one SYS memory `sys0` with the channels memcpy0 and
                     cma0, then the rest of the block.
  python run [node]  run in one Python process per page, blocks sharing
                     their names (a later block may use what an earlier one
                     made), against the node named (default: the first).
  sh run [node]      run by bash -e with isoctl on PATH and ISOMETRY_SOCKET
                     set to the node's socket. sh blocks above a page's
                     first toml block run before its daemons start (setup:
                     certificates, files the config names).
  cpp run [node]     a whole program: --write-cpp writes it out at configure
                     time (DIR/<page>_<n>.cc, the n-th cpp block of the page,
                     the sockets read from ISOMETRY_SOCKET and
                     ISOMETRY_LOCAL_SOCKET), CMake builds it against the
                     client library into the same directory, and it runs
                     with both set to the node's sockets and must exit 0.
  file=NAME          the block is written to NAME in the page's working
                     directory (where blocks run) instead of run; a later
                     sh block runs it.
  needs=native       skipped, saying so, where the build has no
                     isometry._native (sanitizer builds, no pybind11).

Before anything runs, the production paths in every block are replaced by the
private ones: the sockets /run/isometry/grpc.sock and isometry.sock, the
operator token /var/lib/isometry/operator.token, /srv/isometry/ (a DSK
directory named in a toml block is made), the cluster secret
/etc/isometry/cluster.secret (one shared, random secret), the rest of
/etc/isometry/ (a directory of the page), every 10.0.0.N:PORT (a free port
on 127.0.0.1), build-release/ (this build) and scripts/ (the repository's).
A page with several nodes waits until each sees the others up before its
first python, sh or cpp block. A runnable block that still names
/etc/isometry, /run/isometry, /srv/isometry or /var/lib/isometry after that
fails instead of touching this machine's daemon. Fences may be indented (a
block in a list item).

Fails (exit 1) naming the page, the block's line and its output when a block
is unmarked or fails, a cpp block's program is missing or older than the block
(rebuild), a daemon does not start or exits non-zero on SIGTERM, or no page
has a runnable block. Standard library only, with the client's package from
--pythonpath.
"""

import argparse
import base64
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "pyfixture"))
from isometryd_process import IsometrydProcess, daemon_section  # noqa: E402
from ports import free_port  # noqa: E402

BASE = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "256MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"

[[channel]]
name = "cma0"
kind = "cma"
"""

LANGUAGES = ("toml", "python", "sh", "cpp")        # what runs
MUST_CHOOSE = LANGUAGES + ("bash",)                # what must say run or norun
# A fence may be indented (a block in a list item): its lines lose that indent.
FENCE = re.compile(r"^( *)```([^\n]*)\n(.*?)^\1```", re.S | re.M)
RUN = re.compile(r"run(?: +(?!file=|needs=)([\w-]+))?(?: +file=([\w.-]+))?(?: +needs=(native))? *$")
Block = collections.namedtuple("Block", "line lang node file needs code")

# One Python process per page: reads {"code", "name"} lines, runs each in one
# namespace, answers {"ok", "error"} on its own stdout (the blocks' prints go
# to stderr, which the runner shows).
SERVER = r"""
import json, sys, traceback
out, sys.stdout = sys.stdout, sys.stderr
names = {"__name__": "__main__"}
for line in sys.stdin:
    req = json.loads(line)
    try:
        exec(compile(req["code"], req["name"], "exec"), names)
        reply = {"ok": True}
    except BaseException:
        reply = {"ok": False, "error": traceback.format_exc()}
    sys.stderr.flush()
    out.write(json.dumps(reply) + "\n")
    out.flush()
"""


class Failure(Exception):
    pass


def blocks(path, strict=True):
    """Every runnable block of a page, in order (Block).

    Raises Failure (when strict) listing every block of a runnable language
    that says neither run nor norun: REASON, and every run marker it cannot
    read."""
    text = open(path, encoding="utf-8").read()
    found, wrong = [], []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        lang, _, marker = m.group(2).strip().partition(" ")
        marker = marker.strip()
        run = RUN.match(marker)
        if run and lang in LANGUAGES:
            code = re.sub(r"(?m)^" + m.group(1), "", m.group(3))
            found.append(Block(line, lang, run.group(1) or "", run.group(2), run.group(3), code))
        elif run:
            wrong.append(f"{path}:{line}: ```{lang} run: only {', '.join(LANGUAGES)} blocks run")
        elif re.match(r"norun: *\S", marker):
            continue
        elif lang in MUST_CHOOSE:
            wrong.append(f"{path}:{line}: ```{m.group(2).strip()}: mark it `{lang} run` or "
                         f"`{lang} norun: <why it cannot run>`")
    if wrong and strict:
        raise Failure("\n".join(wrong))
    return found


def native_available():
    """Whether this build has isometry._native (not in sanitizer builds)."""
    import isometry
    return isometry.native_available()


def cpp_name(path, n):
    """The n-th (from 1) cpp block of a page: its program's name."""
    stem = os.path.splitext(os.path.basename(path))[0].lower().replace("-", "_")
    return f"{stem}_{n}"


def cpp_source(code):
    """A cpp block as the program CMake builds: the sockets from the environment."""
    for old, var in (('"/run/isometry/grpc.sock"', "ISOMETRY_SOCKET"),
                     ('"/run/isometry/isometry.sock"', "ISOMETRY_LOCAL_SOCKET")):
        code = code.replace(old, f'std::getenv("{var}")')
    return "#include <cstdlib>  // written from a ```cpp run block by doc_blocks.py\n" + code


def cpp_blocks(path):
    """(line, name, source) of every cpp run block of a page."""
    cpp = [b for b in blocks(path, strict=False) if b.lang == "cpp"]
    return [(b.line, cpp_name(path, i), cpp_source(b.code)) for i, b in enumerate(cpp, 1)]


def write_cpp(out, paths):
    """Writes every cpp run block out (only on change, so a configure does not
    rebuild them) and prints their names, ;-separated, for CMake. Unmarked
    blocks are docs_blocks' failure, not the configure's."""
    os.makedirs(out, exist_ok=True)
    names = []
    for path in pages(paths):
        for _, name, source in cpp_blocks(path):
            file = os.path.join(out, name + ".cc")
            if not os.path.exists(file) or open(file, encoding="utf-8").read() != source:
                with open(file, "w", encoding="utf-8") as f:
                    f.write(source)
            names.append(name)
    print(";".join(names), end="")


class Page:
    def __init__(self, path, args):
        self.path, self.args = path, args
        self.blocks = blocks(path)
        cpp = [b for b in self.blocks if b.lang == "cpp"]
        self.programs = {b.line: cpp_name(path, i) for i, b in enumerate(cpp, 1)}
        self.root = tempfile.mkdtemp(prefix="iso-doc-")
        nodes = [b.node for b in self.blocks if b.lang == "toml"]
        self.nodes = list(dict.fromkeys(nodes)) or [""]
        self.dirs = {n: os.path.join(self.root, n or "node") for n in self.nodes}
        self.addresses = {}
        self.secret = os.path.join(self.root, "cluster.secret")
        self.daemons = {}
        self.python = None
        self.skipped = 0

    def where(self, line):
        return f"{self.path}:{line}"

    def node(self, name, line):
        name = name or self.nodes[0]
        if name not in self.dirs:
            raise Failure(f"{self.where(line)}: no toml block configures node '{name}'")
        return name

    def substitute(self, code, node):
        d = self.dirs[node]
        for old, new in (("/run/isometry/grpc.sock", f"{d}/grpc.sock"),
                         ("/run/isometry/isometry.sock", f"{d}/local.sock"),
                         ("/var/lib/isometry/operator.token", f"{d}/state/operator.token"),
                         ("/srv/isometry/", f"{d}/srv/"),
                         ("/etc/isometry/cluster.secret", self.secret),
                         ("/etc/isometry/", f"{self.root}/etc/"),
                         ("build-release/", self.args.build_dir + "/")):
            code = code.replace(old, new)
        code = re.sub(r"(?<![\w./-])scripts/", REPO + "/scripts/", code)
        # A block must never touch this machine's own daemon or files.
        left = re.search(r"/(?:etc|run|srv|var/lib)/isometry\b", code)
        if left:
            raise Failure(f"{self.path}: a runnable block names {left.group(0)}, which the test "
                          f"does not replace: mark it norun or use a replaced path")

        def address(m):
            if m.group(0) not in self.addresses:
                self.addresses[m.group(0)] = f"127.0.0.1:{free_port()}"
            return self.addresses[m.group(0)]
        return re.sub(r"\b10\.0\.0\.\d+:\d+\b", address, code)

    def start(self):
        with open(self.secret, "w") as f:
            f.write(base64.b64encode(os.urandom(32)).decode() + "\n")
        os.chmod(self.secret, 0o600)
        pieces = {n: ("", "") for n in self.nodes}
        for line, lang, node, _, _, code in self.blocks:
            if lang != "toml":
                continue
            node = self.node(node, line)
            code = self.substitute(code, node)
            for directory in re.findall(r'(?m)^directory *= *"([^"]+)"', code):
                os.makedirs(directory, exist_ok=True)
            # Its [daemon] keys join the test's [daemon] section.
            m = re.match(r"\[daemon\]\n(.*?)(?=^\[|\Z)", code, re.S | re.M)
            keys, rest = (m.group(1), code[m.end():]) if m else ("", code)
            pieces[node] = (pieces[node][0] + keys, pieces[node][1] + rest)
        for n in self.nodes:
            d = self.dirs[n]
            os.makedirs(d, exist_ok=True)
            config = os.path.join(d, "isometryd.toml")
            with open(config, "w") as f:
                f.write(daemon_section(d, self.args.isometryd, shutdown_grace_ms=None)
                        + pieces[n][0] + BASE + pieces[n][1])
            daemon = IsometrydProcess(self.args.isometryd, config,
                                      os.path.join(d, "isometryd.log"),
                                      os.path.join(d, "grpc.sock"), name=n or "isometryd")
            self.daemons[n] = daemon
            try:
                daemon.start()
            except AssertionError as e:
                raise Failure(f"{self.path}: {e}\nconfig:\n{open(config).read()}") from None
        if len(self.nodes) > 1:
            self.wait_up()

    def wait_up(self, timeout_s=20):
        from isometry import Client
        deadline = time.monotonic() + timeout_s
        while True:
            up = True
            for n in self.nodes:
                with Client(os.path.join(self.dirs[n], "grpc.sock"), name="doc-wait") as c:
                    for p in c.peers().peers:
                        up &= p.state == "up" and p.data_out > 0 and p.data_in >= p.data_out
            if up:
                return
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {n}:\n{d.log_text(2000)}" for n, d in self.daemons.items())
                raise Failure(f"{self.path}: the nodes did not see each other up:\n{logs}")
            time.sleep(0.1)

    def run_python(self, line, code):
        if self.python is None:
            env = dict(os.environ, PYTHONPATH=self.args.pythonpath)
            self.python = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True, env=env,
                                           cwd=self.root)
        self.python.stdin.write(json.dumps({"code": code, "name": self.where(line)}) + "\n")
        self.python.stdin.flush()
        reply = self.python.stdout.readline()
        if not reply:
            raise Failure(f"{self.where(line)}: the Python process died")
        reply = json.loads(reply)
        if not reply["ok"]:
            raise Failure(f"{self.where(line)}: the python block failed:\n{code}\n{reply['error']}")

    def run_cpp(self, line, node):
        name = self.programs[line]
        program = os.path.join(self.args.cpp_dir, name)
        source = program + ".cc"
        if (not os.path.exists(program) or not os.path.exists(source)
                or os.path.getmtime(program) < os.path.getmtime(source)):
            raise Failure(f"{self.where(line)}: its program {program} is not built or older "
                          f"than the block (reconfigure and build: ninja doc_{name})")
        code = [b.code for b in self.blocks if b.line == line][0]
        if open(source, encoding="utf-8").read() != cpp_source(code):
            raise Failure(f"{self.where(line)}: {source} is not this block: reconfigure and "
                          f"build")
        d = self.dirs[node]
        env = dict(os.environ, ISOMETRY_SOCKET=os.path.join(d, "grpc.sock"),
                   ISOMETRY_LOCAL_SOCKET=os.path.join(d, "local.sock"))
        r = subprocess.run([program], env=env, cwd=self.root, capture_output=True, text=True,
                           timeout=60)
        sys.stderr.write(r.stdout + r.stderr)
        if r.returncode != 0:
            raise Failure(f"{self.where(line)}: the cpp block's program exited {r.returncode}:\n"
                          f"{code}\n{r.stdout}{r.stderr}")

    def run_sh(self, line, code, node):
        env = dict(os.environ, ISOMETRY_SOCKET=os.path.join(self.dirs[node], "grpc.sock"),
                   PATH=os.path.dirname(os.path.abspath(self.args.isoctl)) + ":"
                   + os.environ.get("PATH", "/usr/bin:/bin"))
        r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], env=env, cwd=self.root,
                           capture_output=True, text=True, timeout=60)
        sys.stderr.write(r.stdout + r.stderr)
        if r.returncode != 0:
            raise Failure(f"{self.where(line)}: the sh block exited {r.returncode}:\n{code}\n"
                          f"{r.stdout}{r.stderr}")

    def run(self):
        first_toml = min([b.line for b in self.blocks if b.lang == "toml"], default=0)
        for line, lang, node, file, needs, code in self.blocks:
            if lang == "toml":
                continue
            if needs == "native" and not native_available():
                print(f"{self.where(line)}: skipped: needs the Python client's native extension, "
                      f"which this build has not", file=sys.stderr)
                self.skipped += 1
                continue
            if line > first_toml and not self.daemons:
                self.start()
            node = self.node(node, line)
            code = self.substitute(code, node)
            if file:
                print(f"{self.where(line)}: {lang} written to {file}", file=sys.stderr)
                with open(os.path.join(self.root, file), "w", encoding="utf-8") as f:
                    f.write(code)
                continue
            print(f"{self.where(line)}: {lang} on {node or 'the daemon'}", file=sys.stderr)
            if lang == "python":
                self.run_python(line, code)
            elif lang == "cpp":
                self.run_cpp(line, node)
            else:
                self.run_sh(line, code, node)
        if not self.daemons:
            self.start()

    def close(self):
        if self.python:
            self.python.stdin.close()
            self.python.wait(timeout=30)
        failures = []
        for n, d in self.daemons.items():
            status = d.stop()
            if status != 0:
                failures.append(f"{self.path}: isometryd {n} exited {status} on SIGTERM:\n"
                                f"{d.log_text(2000)}")
            d.close()
        shutil.rmtree(self.root, ignore_errors=True)
        if failures:
            raise Failure("\n".join(failures))


def pages(paths):
    for p in paths:
        if os.path.isdir(p):
            yield from (os.path.join(p, f) for f in sorted(os.listdir(p)) if f.endswith(".md"))
        else:
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write-cpp", metavar="DIR", help="write the cpp run blocks out and stop")
    ap.add_argument("--isometryd")
    ap.add_argument("--isoctl")
    ap.add_argument("--pythonpath")
    ap.add_argument("--cpp-dir", help="where CMake built the cpp run blocks (--write-cpp's DIR)")
    ap.add_argument("--build-dir", help="what build-release/ stands for (default: "
                    "--pythonpath's parent)")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    if args.write_cpp:
        write_cpp(args.write_cpp, args.paths)
        return 0
    for a in ("isometryd", "isoctl", "pythonpath", "cpp_dir"):
        if not getattr(args, a):
            ap.error(f"--{a.replace('_', '-')} is required")
    args.pythonpath, args.isometryd, args.cpp_dir = map(
        os.path.abspath, (args.pythonpath, args.isometryd, args.cpp_dir))
    args.build_dir = os.path.abspath(args.build_dir or os.path.dirname(args.pythonpath))
    sys.path.insert(0, args.pythonpath)
    unmarked = []
    for path in pages(args.paths):
        try:
            blocks(path)
        except Failure as e:
            unmarked.append(str(e))
    if unmarked:
        print("doc_blocks: blocks that say neither run nor norun:\n" + "\n".join(unmarked),
              file=sys.stderr)
        return 1
    ran = skipped = 0
    try:
        for path in pages(args.paths):
            page = Page(path, args)
            if not page.blocks:
                shutil.rmtree(page.root, ignore_errors=True)
                continue
            t0 = time.monotonic()
            try:
                page.run()
            finally:
                page.close()
            ran += sum(1 for b in page.blocks if b.lang != "toml") - page.skipped
            skipped += page.skipped
            print(f"{path}: {len(page.blocks)} runnable blocks passed "
                  f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    except Failure as e:
        print(f"doc_blocks: {e}", file=sys.stderr)
        return 1
    if ran == 0:
        print("doc_blocks: no page has a runnable block", file=sys.stderr)
        return 1
    print(f"doc_blocks: {ran} blocks ran" + (f", {skipped} skipped" if skipped else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
