"""One isometryd process for the Python test suites (client, isoctl and
cluster tests): started from a config file, its output appended to a log
file, stopped with SIGTERM and its exit status reported.

Standard library only, so Debian's /usr/bin/python3 runs it as is.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

# One SYS memory (a 64 MiB pool, 32 MiB a client) and a memcpy channel:
# the config after the [daemon] section that single-daemon tests and
# tools/bench/python_latency.py start with.
ONE_SYS_MEMORY = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
client_quota = "32MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
"""


def daemon_config_tool(isometryd):
    """The isometry_daemon_config binary: $ISOMETRY_DAEMON_CONFIG (ctest sets
    it), else its place in the build tree that holds `isometryd`
    (build/daemon/isometryd -> build/tools/common/isometry_daemon_config)."""
    tool = os.environ.get("ISOMETRY_DAEMON_CONFIG")
    if tool:
        return tool
    build = os.path.dirname(os.path.dirname(os.path.abspath(isometryd)))
    return os.path.join(build, "tools", "common", "isometry_daemon_config")


def daemon_section(directory, isometryd, log_level="warn", shutdown_grace_ms=2000,
                   calibrate=False, extra=()):
    """The [daemon] section of a private daemon's config, written by the one
    writer every launcher uses (tools/common/daemon_config.h, through the
    isometry_daemon_config tool): sockets local.sock and grpc.sock and the
    state directory state/ in `directory`. `shutdown_grace_ms` None keeps
    the daemon's default; `extra` is (key, TOML value) pairs, strings
    quoted. Ends after its last key, so more [daemon] keys may follow."""
    args = [daemon_config_tool(isometryd), "--dir", directory, "--log-level", log_level,
            "--shutdown-grace-ms", "default" if shutdown_grace_ms is None else str(shutdown_grace_ms)]
    if calibrate:
        args.append("--calibrate")
    for key, value in extra:
        args += ["--set", f"{key}={value}"]
    try:
        r = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise AssertionError(f"no {args[0]}: build it (target isometry_daemon_config) "
                             "or point ISOMETRY_DAEMON_CONFIG at it") from None
    if r.returncode != 0:
        raise AssertionError(f"{args[0]} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def _accepts(path):
    """True once a unix socket at `path` takes connections: the file appears
    at bind(), before listen(), and a connect in between is refused."""
    if not os.path.exists(path):
        return False
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class IsometrydProcess:
    """`prefix` runs before the binary (e.g. ["ip", "netns", "exec", ns]);
    `env` adds variables to the test's environment."""

    @classmethod
    def started_in_temp_dir(cls, isometryd, config_template, prefix, dirs=(), daemon=None):
        """A daemon in a fresh temporary directory: its [daemon] section
        (daemon_section with the options in the dict `daemon`) and then
        `config_template` with {dir} filled in are its config (sockets,
        state, `dirs` made inside it), grpc.sock its socket. Returns
        (directory, started daemon); on a failed start the directory is
        removed and AssertionError raised."""
        directory = tempfile.mkdtemp(prefix=prefix)
        for d in dirs:
            os.mkdir(os.path.join(directory, d))
        config = os.path.join(directory, "isometry.toml")
        try:
            text = daemon_section(directory, isometryd, **(daemon or {}))
        except AssertionError:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        with open(config, "w") as f:
            f.write(text + config_template.format(dir=directory))
        daemon = cls(
            isometryd,
            config,
            os.path.join(directory, "isometryd.log"),
            os.path.join(directory, "grpc.sock"),
        )
        try:
            daemon.start()
        except AssertionError:
            daemon.close()
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return directory, daemon

    def __init__(self, isometryd, config, log_path, socket, prefix=(), env=None, name="isometryd"):
        self.isometryd = isometryd
        self.config = config
        self.log_path = log_path
        self.socket = socket
        self.prefix = list(prefix)
        self.env = dict(env or {})
        self.name = name
        self.proc = None
        self._log = None

    def start(self, ready=None, timeout_s=20):
        """Starts the daemon and waits until its gRPC socket accepts and
        `ready()` (optional) returns true. Raises AssertionError with the
        log's tail if it exits or is not ready in time (it is then killed).
        A socket left by a killed predecessor is removed first."""
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        self.close_log()
        self._log = open(self.log_path, "ab")
        env = dict(os.environ)
        env.update(self.env)
        self.proc = subprocess.Popen(
            self.prefix + [self.isometryd, "--config", self.config],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + timeout_s
        while not (_accepts(self.socket) and (ready is None or ready())):
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.name}: isometryd exited with {self.proc.returncode} while "
                    f"starting:\n{self.log_text()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(
                    f"{self.name}: isometryd not ready after {timeout_s} s:\n{self.log_text()}"
                )
            time.sleep(0.02)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s=20):
        """SIGTERM; the exit status, or None if it had to be killed after
        `timeout_s`. Returns the old status when it already ended."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        return self.proc.returncode

    def kill(self):
        """SIGKILL and reap (no-op when it is not running)."""
        if self.alive():
            self.proc.kill()
            self.proc.wait()

    def log_text(self, tail=4000):
        """The last `tail` characters of the log (all of it with None)."""
        if self._log:
            self._log.flush()
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""
        return text if tail is None else text[-tail:]

    def close_log(self):
        if self._log:
            self._log.close()
            self._log = None

    def close(self):
        """Kills a daemon still running and closes the log."""
        self.kill()
        self.close_log()
