"""Two network namespaces joined by a veth pair, shaped with tc tbf: a
two-host network on one machine (root only)."""

import os
import shutil
import subprocess
import unittest


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def unavailable_reason():
    """Why namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "not root: ip netns needs CAP_SYS_ADMIN"
    probe = f"iso-probe-{os.getpid()}"
    try:
        run("ip", "netns", "add", probe)
        run("ip", "netns", "del", probe)
    except (OSError, subprocess.CalledProcessError) as e:
        return f"ip netns does not work here: {e}"
    return None


class ShapedPair:
    """Namespaces <tag>-a and <tag>-b, addresses 10.<n>.0.1 and .2, each
    direction limited to `rate` (tc syntax, e.g. "8gbit")."""

    def __init__(self, rate, subnet=77):
        tag = f"iso{os.getpid() % 100000}"
        self.ns = [f"{tag}-a", f"{tag}-b"]
        self.hosts = [f"10.{subnet}.0.1", f"10.{subnet}.0.2"]
        self.dev = [f"{tag}a", f"{tag}b"]
        self.rate = rate
        for ns in self.ns:
            run("ip", "netns", "add", ns)
        try:
            run("ip", "link", "add", self.dev[0], "type", "veth", "peer", "name", self.dev[1])
            for ns, dev, host in zip(self.ns, self.dev, self.hosts):
                run("ip", "link", "set", dev, "netns", ns)
                run("ip", "-n", ns, "addr", "add", f"{host}/24", "dev", dev)
                run("ip", "-n", ns, "link", "set", dev, "up")
                run("ip", "-n", ns, "link", "set", "lo", "up")
                # Token bucket: `rate`, a burst of 1 ms at that rate (at
                # least 64 KiB), queueing at most 20 ms.
                run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                    "rate", rate, "burst", self._burst(), "latency", "20ms")
        except Exception:
            self.close()
            raise

    def set_rate(self, rate):
        """Changes the shaping of both directions to `rate`."""
        self.rate = rate
        for ns, dev in zip(self.ns, self.dev):
            run("ip", "netns", "exec", ns, "tc", "qdisc", "change", "dev", dev, "root", "tbf",
                "rate", rate, "burst", self._burst(), "latency", "20ms")

    def _burst(self):
        units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
        for u, scale in units.items():
            if self.rate.endswith(u):
                bps = float(self.rate[: -len(u)]) * scale
                return str(max(65536, int(bps / 8 / 1000)))
        return "262144"

    def rate_bytes_per_s(self):
        units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
        for u, scale in units.items():
            if self.rate.endswith(u):
                return float(self.rate[: -len(u)]) * scale / 8
        raise ValueError(self.rate)

    def cut(self, index=0):
        """Takes one end's link down (a partition: no FIN, no RST)."""
        run("ip", "-n", self.ns[index], "link", "set", self.dev[index], "down")

    def heal(self, index=0):
        """Brings the end cut() took down back up."""
        run("ip", "-n", self.ns[index], "link", "set", self.dev[index], "up")

    def block_port(self, index, port):
        """Drops every TCP segment arriving at end `index` for `port` (an
        nftables input rule in its namespace): connections to that port go
        silent, the others flow. Raises unittest.SkipTest without nft."""
        if shutil.which("nft") is None:
            raise unittest.SkipTest("nft is not installed (Debian package nftables)")
        rules = ("table inet isometry_block {\n"
                 "  chain input { type filter hook input priority 0; "
                 f"tcp dport {int(port)} drop; }}\n}}\n")
        subprocess.run(["ip", "netns", "exec", self.ns[index], "nft", "-f", "-"], input=rules,
                       text=True, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def unblock(self, index):
        """Removes what block_port() added at end `index`."""
        run("ip", "netns", "exec", self.ns[index], "nft", "delete", "table", "inet",
            "isometry_block")

    def close(self):
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


class ShapedStar:
    """Namespaces <tag>-<name> on one switch (a bridge in its own namespace),
    addresses 10.<subnet>.0.1, .2, ...; every host sends at `rate`, and at
    `slow` to the pairs in `slow_pairs` (tc htb, a u32 filter per
    destination): a network where the direct link between two hosts is
    slower than a way through a third."""

    def __init__(self, names, rate, slow, slow_pairs, subnet=81):
        tag = f"iso{os.getpid() % 100000}"
        self.switch = f"{tag}-sw"
        self.ns = [f"{tag}-{n}" for n in names]
        self.hosts = [f"10.{subnet}.0.{i + 1}" for i in range(len(names))]
        run("ip", "netns", "add", self.switch)
        try:
            run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            run("ip", "-n", self.switch, "link", "set", "br0", "up")
            for i, (name, ns, host) in enumerate(zip(names, self.ns, self.hosts)):
                run("ip", "netns", "add", ns)
                dev, port = f"{tag}h{i}", f"{tag}s{i}"
                run("ip", "link", "add", dev, "type", "veth", "peer", "name", port)
                run("ip", "link", "set", dev, "netns", ns)
                run("ip", "link", "set", port, "netns", self.switch)
                run("ip", "-n", self.switch, "link", "set", port, "master", "br0")
                run("ip", "-n", self.switch, "link", "set", port, "up")
                run("ip", "-n", ns, "addr", "add", f"{host}/24", "dev", dev)
                run("ip", "-n", ns, "link", "set", dev, "up")
                run("ip", "-n", ns, "link", "set", "lo", "up")
                tc = ["ip", "netns", "exec", ns, "tc"]
                run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
                run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
                    "rate", rate, "ceil", rate)
                run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb",
                    "rate", slow, "ceil", slow)
                for a, b in slow_pairs:
                    other = b if a == name else a if b == name else None
                    if other is None:
                        continue
                    dst = self.hosts[names.index(other)]
                    run(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip",
                        "u32", "match", "ip", "dst", f"{dst}/32", "flowid", "1:20")
        except Exception:
            self.close()
            raise

    def close(self):
        for ns in self.ns + [self.switch]:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
