"""`isometryd --check-config` against the real binary (issue #11, class 6).

Each bad config of the table must be rejected, by --check-config and by a
start alike, with a nonzero exit and "FILE:LINE: key 'KEY'" pointing at the
line that holds the offending key; a config that passes --check-config must
start. Standard library only (Debian's /usr/bin/python3).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "isometryd")

BASE = """\
[daemon]
local_socket = "{dir}/local.sock"
grpc_socket = "{dir}/grpc.sock"
state_dir = "{dir}/state"
log_level = "warn"
calibrate = false

[runtime]
space_threshold = "8MiB"

[[memory]]
name = "sys0"
kind = "SYS"
staging = "64MiB"
pool = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 1
"""

PEER = """
[cluster]
node_name = "a"
secret_file = "{dir}/cluster.secret"
data_listen = "127.0.0.1:0"

[[peer]]
name = "b"
address = "127.0.0.1:1"
"""

DSK = """
[[memory]]
name = "dsk0"
kind = "DSK"
staging = 0
directory = "{dir}/files"
"""


def daemon_key(key_line):
    """BASE with one more line in [daemon]."""
    return BASE.replace('calibrate = false\n', 'calibrate = false\n' + key_line + "\n")


def setup_file(name, text="x"):
    def make(d):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return make


# (name, config template, line marker (the line that must be named; None:
# line 1), key named, what the message must also say, set-up in the
# directory)
CASES = [
    ("dsk_directory_missing", BASE + DSK, 'directory = "{dir}/files"', "memory.directory",
     "No such file or directory", None),
    ("dsk_directory_is_a_file", BASE + DSK, 'directory = "{dir}/files"', "memory.directory",
     "is not a directory", setup_file("files")),
    ("socket_path_too_long", BASE.replace("{dir}/local.sock", "{dir}/" + "s" * 110 + ".sock"),
     "local_socket =", "daemon.local_socket", "at most 107", None),
    ("socket_path_is_a_file", BASE, "local_socket =", "daemon.local_socket",
     "is not a socket", setup_file("local.sock", "keep me")),
    ("secret_file_unreadable", daemon_key('grpc_tcp = "127.0.0.1:0"') + PEER,
     "secret_file =", "cluster.secret_file", "cannot be read", None),
    ("secret_file_too_short", daemon_key('grpc_tcp = "127.0.0.1:0"') + PEER,
     "secret_file =", "cluster.secret_file", "at least 16", setup_file("cluster.secret", "short")),
    # A credential named with no [[peer]] yet is checked all the same.
    ("secret_file_unreadable_without_peers", BASE + PEER.split("[[peer]]")[0],
     "secret_file =", "cluster.secret_file", "cannot be read", None),
    ("tls_files_missing_without_peers",
     BASE + '[cluster]\nnode_name = "a"\n\n[cluster.tls]\nca_file = "{dir}/ca.pem"\n'
     'cert_file = "{dir}/a.pem"\nkey_file = "{dir}/a.key"\n',
     "[cluster.tls]", "cluster.tls", "ca.pem", None),
    ("socket_group_unknown", daemon_key('socket_group = "no-such-group-iso"'), "socket_group =",
     "daemon.socket_group", "does not exist", None),
    ("grpc_tcp_without_port", daemon_key('grpc_tcp = "127.0.0.1"'), "grpc_tcp =",
     "daemon.grpc_tcp", "is not host:port", None),
    ("grpc_tcp_port_too_large", daemon_key('grpc_tcp = "127.0.0.1:99999"'), "grpc_tcp =",
     "daemon.grpc_tcp", "is not host:port", None),
    ("grpc_tcp_not_this_host", daemon_key('grpc_tcp = "192.0.2.1:7470"'), "grpc_tcp =",
     "daemon.grpc_tcp", "not an address of this machine", None),
    ("data_listen_bad", daemon_key('grpc_tcp = "127.0.0.1:0"') +
     PEER.replace('"127.0.0.1:0"', '"nowhere"'), "data_listen =", "cluster.data_listen",
     "is not host:port", setup_file("cluster.secret", "0123456789abcdef0123")),
    ("state_dir_cannot_be_created", BASE.replace("{dir}/state", "{dir}/plain/state"),
     "state_dir =", "daemon.state_dir", "is not a directory", setup_file("plain")),
    ("sq_entries_not_power_of_two", daemon_key("sq_entries = 100"), "sq_entries =",
     "daemon.sq_entries", "powers of two", None),
    ("cq_entries_not_power_of_two", daemon_key("cq_entries = 3"), "cq_entries =",
     "daemon.cq_entries", "powers of two", None),
    ("duplicate_memory", BASE + '\n[[memory]]\nname = "sys0"  # again\nkind = "REG"\n',
     'name = "sys0"  # again', "memory.name", "defined twice", None),
    ("unknown_edge_memory",
     BASE + 'edges = [\n  ["sys0", "sys0"],\n  ["sys0", "gpu9"],\n]\n',
     '["sys0", "gpu9"]', "channel.edges", "unknown memory 'gpu9'", None),
    # Which memories a channel's kind joins is its descriptor's to say
    # (channels/channel_edges.h), checked with the same file, line and key.
    ("edge_kind_cannot_serve",
     BASE + DSK + '\n[[channel]]\nname = "rd"\nkind = "disk_read"\nedges = [["sys0", "dsk0"]]\n',
     '[["sys0", "dsk0"]]', "channel.edges", "channel 'rd' (disk_read) cannot serve sys0 -> dsk0",
     None),
    ("edge_served_twice", BASE + '\n[[channel]]\nname = "memcpy1"\nkind = "memcpy"  # twice\n',
     'kind = "memcpy"  # twice', "channel.kind",
     "channel 'memcpy1' serves sys0 -> sys0, which another channel already serves", None),
    ("log_level", BASE.replace('log_level = "warn"', 'log_level = "loud"'), "log_level =",
     "daemon.log_level", "'loud'", None),
    ("empty_file", "", None, "memory", "no [[memory]]", None),
    ("quota_above_pool", BASE.replace('pool = "64MiB"', 'pool = "64MiB"\nclient_quota = "1GiB"'),
     "client_quota =", "memory.client_quota", "above its pool", None),
    ("peers_without_grpc_tcp", BASE + PEER, "[daemon]", "daemon.grpc_tcp",
     "daemon.grpc_tcp is empty", setup_file("cluster.secret", "0123456789abcdef0123")),
    ("fbm_without_device", BASE.replace('kind = "SYS"', 'kind = "FBM"'), "[[memory]]",
     "memory.device", "needs a device", None),
    ("space_threshold", BASE.replace('"8MiB"', "100"), "space_threshold =",
     "runtime.space_threshold", "at least 4096", None),
]


def run_daemon(args, timeout=20):
    return subprocess.run(
        [ISOMETRYD] + args, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL)


class CheckConfigTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="isometry-checkcfg-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, template):
        path = os.path.join(self.dir, "isometry.toml")
        text = template.replace("{dir}", self.dir)
        with open(path, "w") as f:
            f.write(text)
        return path, text

    def test_bad_configs_are_rejected_with_file_line_and_key(self):
        for name, template, marker, key, says, setup in CASES:
            with self.subTest(name):
                for entry in os.listdir(self.dir):
                    p = os.path.join(self.dir, entry)
                    shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
                if setup:
                    setup(self.dir)
                path, text = self.write(template)
                line = 1
                if marker is not None:
                    marker = marker.replace("{dir}", self.dir)
                    lines = [i + 1 for i, l in enumerate(text.splitlines()) if marker in l]
                    self.assertEqual(len(lines), 1, f"marker {marker!r} must be on one line")
                    line = lines[0]
                before = sorted(os.listdir(self.dir))
                expected = f"{path}:{line}: key '{key}'"
                # The check and a start say the same, and the start touches
                # nothing (no state directory, no socket, no removed file).
                for args in (["--config", path, "--check-config"], ["--config", path]):
                    r = run_daemon(args)
                    out = r.stdout + r.stderr
                    self.assertNotEqual(r.returncode, 0, f"{args}: accepted:\n{out}")
                    self.assertIn(expected, out, f"{args}:\n{out}")
                    self.assertIn(says, out, f"{args}:\n{out}")
                    self.assertEqual(sorted(os.listdir(self.dir)), before, f"{args}:\n{out}")
                if name == "socket_path_is_a_file":
                    with open(os.path.join(self.dir, "local.sock")) as f:
                        self.assertEqual(f.read(), "keep me")

    def test_a_config_that_passes_the_check_starts(self):
        os.mkdir(os.path.join(self.dir, "files"))
        with open(os.path.join(self.dir, "cluster.secret"), "w") as f:
            f.write("0123456789abcdef0123")
        os.chmod(os.path.join(self.dir, "cluster.secret"), 0o600)
        # Every key the start checks is set: sockets, a state_dir to create,
        # a group, a TCP address, a DSK directory.
        group = "root" if os.getuid() == 0 else None
        template = daemon_key('grpc_tcp = "127.0.0.1:0"') + DSK
        if group:
            template = template.replace("[daemon]\n", f'[daemon]\nsocket_group = "{group}"\n')
        path, _ = self.write(template)
        r = run_daemon(["--config", path, "--check-config"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("valid", r.stdout)
        # The check created nothing.
        self.assertFalse(os.path.exists(os.path.join(self.dir, "state")))
        daemon = IsometrydProcess(ISOMETRYD, path, os.path.join(self.dir, "isometryd.log"),
                                  os.path.join(self.dir, "grpc.sock"))
        try:
            daemon.start()
            self.assertTrue(os.path.isdir(os.path.join(self.dir, "state")))
            self.assertEqual(daemon.stop(), 0, daemon.log_text())
        finally:
            daemon.close()

    def test_gpu_memories_need_a_gpu(self):
        # What this machine has, as the daemon says at start: GPU memories
        # added per device, or none and why.
        path, _ = self.write(BASE.replace('log_level = "warn"', 'log_level = "info"'))
        daemon = IsometrydProcess(ISOMETRYD, path, os.path.join(self.dir, "isometryd.log"),
                                  os.path.join(self.dir, "grpc.sock"))
        try:
            daemon.start()
            self.assertEqual(daemon.stop(), 0, daemon.log_text())
            log = daemon.log_text(tail=1 << 20)
        finally:
            daemon.close()
        found = re.search(r"GPU memories: (?:none \((.+)\)|added (gpu0 .+))", log)
        self.assertIsNotNone(found, log)
        why = found.group(1)
        if why is not None:
            self.assertIn("GPU: ", log)  # the probe's own line
            self.assertIn(f"GPU: {why}", log)
        # An FBM memory written by hand: refused without a GPU, by the
        # check and by a start alike, at its kind's line.
        shutil.rmtree(os.path.join(self.dir, "state"), ignore_errors=True)
        path, text = self.write(BASE + '\n[[memory]]\nname = "gpu0"\nkind = "FBM"  # here\n'
                                'device = 0\nstaging = "1MiB"\n')
        line = [i + 1 for i, l in enumerate(text.splitlines()) if "# here" in l][0]
        for args in (["--config", path, "--check-config"], ["--config", path]):
            if why is None and args[-1] != "--check-config":
                continue
            r = run_daemon(args)
            out = r.stdout + r.stderr
            if why is None:  # a GPU: the memory is served
                self.assertEqual(r.returncode, 0, out)
                continue
            self.assertNotEqual(r.returncode, 0, out)
            self.assertIn(f"{path}:{line}: key 'memory.kind': memory 'gpu0' is GPU memory (FBM), "
                          f"but this machine has no usable GPU: {why}", out)


if __name__ == "__main__":
    unittest.main()
