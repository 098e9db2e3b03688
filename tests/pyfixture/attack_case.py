"""What the attack tests of tests/python share: the daemon and package from
the environment ctest sets (ISOMETRYD, ISOMETRY_PYTHONPATH), a private
daemon whose sockets another uid reaches, and attacker scripts run as
`nobody` that print their findings as one JSON line.
"""

import json
import os
import shutil
import subprocess
import sys
import time

from isometryd_process import IsometrydProcess

FIXTURE_DIR = os.path.dirname(os.path.abspath(__file__))
ISOMETRYD = os.environ.get("ISOMETRYD", "")
PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")
if PYTHONPATH and PYTHONPATH not in sys.path:
    sys.path.insert(0, PYTHONPATH)
NOBODY = 65534
# A node of one 64 MiB SYS memory and one memcpy thread: the config that
# attacks needing no more start their daemon with.
SMALL_NODE = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 1
"""
SKIP_REASON = "ISOMETRYD is not set: point it at the isometryd binary (and ISOMETRY_PYTHONPATH)"


def note_skip(module):
    """Says on stderr why `module` skips when ISOMETRYD is not set."""
    if not ISOMETRYD:
        print(f"{module}: skipped: {SKIP_REASON}", file=sys.stderr)


def start_daemon(case, config, prefix, daemon, dirs=()):
    """Starts a private isometryd for unittest `case` (stopped, checked for a
    clean exit and removed at cleanup); its directory is opened to other
    uids so an attacker reaches the sockets. Returns (directory, daemon)."""
    directory, process = IsometrydProcess.started_in_temp_dir(
        ISOMETRYD, config, prefix, dirs=list(dirs), daemon=daemon)
    os.chmod(directory, 0o755)

    def stop():
        try:
            case.assertEqual(process.stop(), 0)
        finally:
            process.close()
            shutil.rmtree(directory, ignore_errors=True)
    case.addCleanup(stop)
    return directory, process


def as_uid(uid):
    """A command prefix that runs its program as `uid` (group `uid`, no
    supplementary groups).

    Why not Popen(user=..., group=...): Python then starts the child with
    fork() instead of vfork(), and fork() runs the pthread_atfork handlers
    gRPC registers in this process; with a channel's threads about, they
    hung the test in pthread_join or crashed it (SIGSEGV). vfork() runs no
    handlers, and setpriv changes the ids in the child."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def nobody_process(script, *args, **popen):
    """`script` started as `nobody` with the package on its path."""
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen([*as_uid(NOBODY), sys.executable, "-c", script, *map(str, args)],
                            env=env, text=True, **popen)


def run_as_nobody(case, script, *args, timeout_s=60):
    """Runs `script` as `nobody` to its end; its last stdout line as JSON."""
    p = nobody_process(script, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=timeout_s)
    case.assertEqual(p.returncode, 0, err)
    return json.loads(out.strip().splitlines()[-1])


def _status_field(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key} line in /proc/{pid}/status")


def threads_of(pid):
    """The threads process `pid` has now."""
    return _status_field(pid, "Threads")


def rss_of(pid):
    """Process `pid`'s resident memory, bytes."""
    return _status_field(pid, "VmRSS") * 1024


def wait_until(cond, what, timeout_s=10.0):
    """Returns once `cond()` holds; AssertionError naming `what` after
    `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
