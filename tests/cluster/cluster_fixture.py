"""Several real isometryd processes joined into one cluster, for tests and
benchmarks: each node gets its own sockets, state and DSK directories, a
gRPC TCP port and a data port on loopback (or in a network namespace), and
the same shared secret.

Needs Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf) and
ISOMETRY_PYTHONPATH pointing at build/python.
"""

import os
import sys
import tempfile
import time

if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))

import isometry  # noqa: E402
from isometryd_process import IsometrydProcess, daemon_section  # noqa: E402
from ports import free_port  # noqa: E402,F401  (cf.free_port for the tests)
from daemon_threads import grpc_executor_threads, tasks_of  # noqa: E402,F401  (for the tests)

# [daemon]: isometryd_process.daemon_section (sockets and state in the
# temporary directory) with these options; CONFIG follows it.
DAEMON = dict(log_level="info", shutdown_grace_ms=1000)
CONFIG = """
[runtime]
node = {node_id}
space_threshold = "{th}"
inline_bytes = "64KiB"

[cluster]
node_name = "{name}"
{secret_line}
data_listen = "{host}:0"
data_connections = {connections}
checksum = {checksum}
peer_timeout_ms = {timeout_ms}
keepalive_ms = {keepalive_ms}
request_size = "{request}"
{extra_cluster}
{tls}

[[memory]]
name = "sys0"
kind = "SYS"
staging = "256MiB"
pool = "{pool}"
client_quota = "{pool}"

[[memory]]
name = "dsk0"
kind = "DSK"
staging = "0"
directory = "{dir}/dsk"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
request_size = "4MiB"

[[channel]]
name = "disk_read0"
kind = "disk_read"
threads = 1
request_size = "4MiB"

[[channel]]
name = "disk_write0"
kind = "disk_write"
threads = 1
request_size = "4MiB"
{extra_channels}
{peers}
"""


class Node:
    def __init__(self, cluster, name, node_id, host, netns=None, env=None):
        self.cluster = cluster
        self.name = name
        self.node_id = node_id
        self.host = host
        self.netns = netns
        self.env = env or {}
        self.dir = tempfile.mkdtemp(prefix=f"iso-{name}-", dir=cluster.root)
        os.makedirs(os.path.join(self.dir, "dsk"))
        self.grpc_port = free_port() if netns is None else 7470
        self.process = None

    @property
    def address(self):
        return f"{self.host}:{self.grpc_port}"

    @property
    def socket(self):
        return os.path.join(self.dir, "grpc.sock")

    @property
    def dsk(self):
        return os.path.join(self.dir, "dsk")

    def write_config(self, secret, peers, tls_dir=None, **opts):
        """secret: the secret file (None: none); tls_dir: a directory
        scripts/make-test-ca.sh filled (ca.pem, NAME.pem, NAME.key)."""
        rates = opts.get("link_rates", {})  # peer name -> [[peer]] link_rate
        peer_text = "".join(
            f'\n[[peer]]\nname = "{p.name}"\naddress = "{p.address}"\n'
            + (f'link_rate = "{rates[p.name]}"\n' if p.name in rates else "")
            for p in peers
        )
        grpc_tcp = ("grpc_tcp", f'"{self.host}:{self.grpc_port}"')
        text = daemon_section(self.dir, self.cluster.isometryd, extra=[grpc_tcp], **DAEMON)
        text += CONFIG.format(
            dir=self.dir,
            host=self.host,
            node_id=self.node_id,
            name=self.name,
            secret_line=f'secret_file = "{secret}"' if secret else "",
            tls=(f'\n[cluster.tls]\nca_file = "{tls_dir}/ca.pem"\n'
                 f'cert_file = "{tls_dir}/{self.name}.pem"\nkey_file = "{tls_dir}/{self.name}.key"\n'
                 if tls_dir else ""),
            peers=peer_text,
            connections=opts.get("connections", 4),
            checksum="true" if opts.get("checksum") else "false",
            timeout_ms=opts.get("timeout_ms", 1500),
            keepalive_ms=opts.get("keepalive_ms", 200),
            request=opts.get("request", "4MiB"),
            pool=opts.get("pool", "512MiB"),
            th=opts.get("th", "32MiB"),
            extra_cluster=opts.get("extra_cluster", ""),
            extra_channels=opts.get("extra_channels", ""),
        )
        self.config = os.path.join(self.dir, "isometryd.toml")
        with open(self.config, "w") as f:
            f.write(text)

    def start(self):
        # A killed daemon leaves its local socket (start() removes the gRPC one).
        stale = os.path.join(self.dir, "local.sock")
        if os.path.exists(stale):
            os.unlink(stale)
        for attempt in range(3):
            self.process = IsometrydProcess(
                self.cluster.isometryd,
                self.config,
                os.path.join(self.dir, "isometryd.log"),
                self.socket,
                prefix=["ip", "netns", "exec", self.netns] if self.netns else (),
                env=self.env,
                name=self.name,
            )
            try:
                self.process.start()
                return
            except AssertionError as e:
                # free_port() only saw the gRPC port free; a daemon of a test
                # running beside this one can bind it first. Another one
                # will do; Cluster.start() tells the peers, which name it.
                old = f"{self.host}:{self.grpc_port}"
                if (attempt == 2 or self.netns or "Address already in use" not in str(e)
                        or f"and {old}" not in str(e)):
                    raise
                self.grpc_port = free_port()
                self.replace_in_config(f'"{old}"', f'"{self.host}:{self.grpc_port}"')

    def replace_in_config(self, old, new):
        with open(self.config) as f:
            text = f.read()
        with open(self.config, "w") as f:
            f.write(text.replace(old, new))

    def client(self, name="test", local=False):
        """local: open the session over the local socket (private ranges)."""
        return isometry.Client(
            self.socket, name=name,
            local_socket=os.path.join(self.dir, "local.sock") if local else None)

    def kill(self):
        if self.process:
            self.process.kill()

    def stop(self):
        """SIGTERM; returns the exit status (None if it had to be killed)."""
        if not self.process:
            return 0
        code = self.process.stop()
        self.process.close_log()
        return code

    def log_text(self):
        return self.process.log_text(tail=None) if self.process else ""


class Cluster:
    """names: node names; hosts: their addresses (default all 127.0.0.1);
    netns: optional namespace per node; secrets: optional per-node secret
    (False: no secret_file); tls: per node, the name of a test CA (made by
    scripts/make-test-ca.sh under the cluster's directory; nodes given the
    same name trust each other) or None; node_opts: per node, options that
    override **opts; static_peers: False writes no [[peer]] lists (the nodes
    find each other some other way, e.g. [cluster.etcd] in extra_cluster)."""

    def __init__(self, isometryd, names, hosts=None, netns=None, secrets=None, env=None,
                 root=None, tls=None, node_opts=None, static_peers=True, **opts):
        self.isometryd = isometryd
        self.root = tempfile.mkdtemp(prefix="iso-cluster-", dir=root)
        hosts = hosts or ["127.0.0.1"] * len(names)
        netns = netns or [None] * len(names)
        env = env or [None] * len(names)
        self.nodes = [
            Node(self, n, i + 1, hosts[i], netns[i], env[i]) for i, n in enumerate(names)
        ]
        self.secret_files = []
        tls_dirs = [self.make_ca(ca, names) if ca else None for ca in (tls or [None] * len(names))]
        for i, node in enumerate(self.nodes):
            secret = (secrets[i] if secrets else None)
            path = None
            if secret is not False:
                path = os.path.join(node.dir, "cluster.secret")
                with open(path, "w") as f:
                    f.write((secret or "correct horse battery staple 42") + "\n")
                os.chmod(path, 0o600)
            mine = dict(opts, **((node_opts or [None] * len(names))[i] or {}))
            peers = [p for p in self.nodes if p is not node] if static_peers else []
            node.write_config(path, peers,
                              tls_dir=tls_dirs[i], **mine)

    def make_ca(self, ca, names):
        """A test CA named `ca` with a certificate for every node (made once)."""
        import subprocess

        d = os.path.join(self.root, f"ca-{ca}")
        if not os.path.exists(os.path.join(d, "ca.pem")):
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                  "scripts", "make-test-ca.sh")
            subprocess.run(["sh", script, d, *names], check=True, stdout=subprocess.DEVNULL)
        return d

    def __getitem__(self, name):
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def start(self, wait_up=True):
        for i, n in enumerate(self.nodes):
            old = n.address
            n.start()
            if n.address != old:
                # It had to take another port: every peer's [[peer]] list
                # names it, and those already running read theirs at start.
                for p in self.nodes:
                    if p is not n:
                        p.replace_in_config(f'"{old}"', f'"{n.address}"')
                for p in self.nodes[:i]:
                    p.stop()
                    p.start()
        if wait_up:
            self.wait_up()

    def wait_up(self, nodes=None, timeout=30):
        """Until every listed node sees every other one up with all data
        connections in both directions."""
        nodes = nodes or self.nodes
        names = {n.name for n in nodes}
        deadline = time.time() + timeout
        while True:
            ok = True
            for n in nodes:
                with n.client("wait-up") as c:
                    for p in c.peers().peers:
                        if p.name in names and (
                            p.state != "up" or p.data_out == 0 or p.data_in < p.data_out
                        ):
                            ok = False
            if ok:
                return
            if time.time() > deadline:
                details = {n.name: n.log_text()[-3000:] for n in nodes}
                raise RuntimeError(f"cluster did not come up: {details}")
            time.sleep(0.1)

    @staticmethod
    def published(receiver, nbytes, count):
        """`count` allocations of `nbytes` in `receiver`'s sys0, published."""
        out = []
        for _ in range(count):
            dst = receiver.allocate("sys0", nbytes)
            receiver.publish(dst)
            out.append(dst)
        return out

    @staticmethod
    def published_pairs(client, receiver, nbytes, count, node="b"):
        """`count` pairs of 1-D byte instances of `nbytes`: a source in
        `client`'s sys0, and a destination that `receiver` (a session on
        `node`) allocated and published, registered by `client` as
        `node`:sys0."""
        out = []
        for dst in Cluster.published(receiver, nbytes, count):
            src = client.register_instance(client.allocate("sys0", nbytes), [nbytes], [("v", 1)],
                                           "F,x")
            out.append((src, client.register_instance(dst.id, [nbytes], [("v", 1)], "F,x",
                                                      memory=f"{node}:sys0")))
        return out

    def copy_bytes(self, src, dst, n, timeout_ms=60000):
        """n random bytes from node `src`'s sys0 into a published allocation of
        node `dst`, started on `src`; returns (info, data sent, bytes read back)."""
        a, b = self[src], self[dst]
        data = os.urandom(n)
        with b.client() as cb:
            dst_alloc = cb.allocate("sys0", n)
            cb.publish(dst_alloc)
        with a.client() as ca:
            src_alloc = ca.allocate("sys0", n)
            ca.write(src_alloc, 0, data)
            s = ca.register_instance(src_alloc, [n], [("v", 1)], "F,x")
            d = ca.register_instance(dst_alloc.id, [n], [("v", 1)], "F,x", memory=f"{dst}:sys0")
            t = ca.copy(s, d, wait=False)
            try:
                info = ca.wait(t, timeout_ms=timeout_ms, check=False)
            except Exception:
                # A copy that hangs says little by itself: what both daemons
                # logged goes with the failure (CI keeps only the output).
                for node in (a, b):
                    print(f"--- {node.name}'s log (tail) ---\n{node.log_text()[-6000:]}",
                          file=sys.stderr)
                raise
        with b.client() as cb:
            return info, data, cb.read(dst_alloc, 0, n)

    def stop_checked(self, test):
        """stop(), then `test` asserts every node exited 0 (or was killed, -9),
        with the log tail of any that did not."""
        codes = self.stop()
        for name, code in codes.items():
            if code not in (0, -9):
                print(self[name].log_text()[-4000:], file=sys.stderr)
            test.assertIn(code, (0, -9), f"{name} exited with {code}")

    def stop(self):
        """Stops every node; removes the cluster's directory when each exited 0
        or was killed (-9, as the tests that kill a node on purpose do), and
        keeps it, logs and all, when one failed."""
        import shutil

        codes = {n.name: n.stop() for n in self.nodes}
        if set(codes.values()) <= {0, -9}:
            shutil.rmtree(self.root, ignore_errors=True)
        return codes
