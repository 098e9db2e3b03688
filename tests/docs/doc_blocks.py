#!/usr/bin/python3
"""Runs the code blocks of the guides that are marked runnable.

    doc_blocks.py --isometryd BIN --isoctl BIN --pythonpath DIR DOCS_DIR_OR_PAGE...

A fenced block whose info string is `<language> run [node]` runs; GitHub
shows it as an ordinary `<language>` block. Per page, in document order:

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
                     set to the node's socket.

Before anything runs, the production paths in every block are replaced by the
private ones: the sockets /run/isometry/grpc.sock and isometry.sock, the
operator token /var/lib/isometry/operator.token, /srv/isometry/ (a DSK
directory named in a toml block is made), the cluster secret
/etc/isometry/cluster.secret (one shared, random secret) and every
10.0.0.N:PORT (a free port on 127.0.0.1). A page with several nodes waits
until each sees the others up before its first python or sh block.

Fails (exit 1) naming the page, the block's line and its output when a block
fails, a daemon does not start or exits non-zero on SIGTERM, or no page has a
runnable block. Standard library only, with the client's package from
--pythonpath.
"""

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
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

LANGUAGES = ("toml", "python", "sh")
BLOCK = re.compile(r"^```(\w+) run(?: +([\w-]+))? *\n(.*?)^```", re.S | re.M)

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


def blocks(path):
    """(line, language, node, code) of every runnable block of a page."""
    text = open(path, encoding="utf-8").read()
    found = []
    for m in BLOCK.finditer(text):
        if m.group(1) not in LANGUAGES:
            raise Failure(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: "
                          f"```{m.group(1)} run: only {', '.join(LANGUAGES)} blocks run")
        found.append((text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2) or "",
                      m.group(3)))
    return found


class Page:
    def __init__(self, path, args):
        self.path, self.args = path, args
        self.blocks = blocks(path)
        self.root = tempfile.mkdtemp(prefix="iso-doc-")
        nodes = [n for _, lang, n, _ in self.blocks if lang == "toml"]
        self.nodes = list(dict.fromkeys(nodes)) or [""]
        self.dirs = {n: os.path.join(self.root, n or "node") for n in self.nodes}
        self.addresses = {}
        self.secret = os.path.join(self.root, "cluster.secret")
        self.daemons = {}
        self.python = None

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
                         ("/etc/isometry/cluster.secret", self.secret)):
            code = code.replace(old, new)

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
        for line, lang, node, code in self.blocks:
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
        self.start()
        for line, lang, node, code in self.blocks:
            if lang == "toml":
                continue
            node = self.node(node, line)
            print(f"{self.where(line)}: {lang} on {node or 'the daemon'}", file=sys.stderr)
            code = self.substitute(code, node)
            if lang == "python":
                self.run_python(line, code)
            else:
                self.run_sh(line, code, node)

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
    ap.add_argument("--isometryd", required=True)
    ap.add_argument("--isoctl", required=True)
    ap.add_argument("--pythonpath", required=True)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    args.pythonpath, args.isometryd = map(os.path.abspath, (args.pythonpath, args.isometryd))
    sys.path.insert(0, args.pythonpath)
    ran = 0
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
            ran += sum(1 for b in page.blocks if b[1] != "toml")
            print(f"{path}: {len(page.blocks)} runnable blocks passed "
                  f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    except Failure as e:
        print(f"doc_blocks: {e}", file=sys.stderr)
        return 1
    if ran == 0:
        print("doc_blocks: no page has a runnable python or sh block", file=sys.stderr)
        return 1
    print(f"doc_blocks: {ran} blocks ran", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
