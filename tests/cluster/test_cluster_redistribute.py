"""M:N redistribution between distributed instances whose ranks joined on
several real isometryd daemons on loopback (docs/guides/redistribution.md,
"Redistributing between jobs (M:N)").

Every rank is its own session on the daemon of "its" node; the node that
receives the Redistribute call asks its peers for their ranks and starts a
part on every node holding producer ranks; pieces into a consumer rank on
another node are cross-node datatype copies. Consumer-local arrays are
checked element by element against the global array. Random cases: 1-3
dimensions, grids of 1..4 per dimension, block sizes that do and do not
divide, row- or column-major local storage, both sides spread over 2-3
daemons.

Run like test_cluster (ISOMETRYD, ISOMETRY_PYTHONPATH, /usr/bin/python3).
"""

import os
import random
import struct
import sys
import time
import unittest

ISOMETRYD = os.environ.get("ISOMETRYD", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if ISOMETRYD:
    import cluster_fixture as cf
    from isometry import IsometryError

CMA = '\n[[channel]]\nname = "cma0"\nkind = "cma"\n'


def owned(n, block, procs, coord):
    """The global indices grid coordinate `coord` holds, in local order."""
    return [g for g in range(n) if (g // block) % procs == coord]


def block_of(kind, n, procs):
    if kind == "block":
        return -(-n // procs)
    if kind == "cyclic":
        return 1
    return kind[1]


def grant_of(name):
    """The grant of job `name` (gRPC ranks share one namespace of names: a
    rank of another session joins, and a job redistributes into another
    job's instance, only with that instance's grant)."""
    return f"test grant of job {name}".encode()


def redistribute_granted(client, producer, consumer):
    return client.redistribute(producer, consumer, producer_grant=grant_of(producer),
                               consumer_grant=grant_of(consumer))


def value(index):
    """The global element at `index` (a tuple): a distinct 32-bit value."""
    v = 0
    for i in index:
        v = v * 1009 + i + 1
    return v & 0x7FFFFFFF


class Job:
    """A distributed instance's description and each rank's local indices."""

    def __init__(self, extents, dists, grid, column_major_storage):
        self.extents, self.dists, self.grid = extents, dists, grid
        self.column_major_storage = column_major_storage
        self.blocks = [block_of(d, n, p) for d, n, p in zip(dists, extents, grid)]

    def ranks(self):
        count = 1
        for p in self.grid:
            count *= p
        return count

    def local(self, rank):
        """Per dimension the global indices `rank` holds (row-major ranks)."""
        coords, r = [], rank
        for p in reversed(self.grid):
            coords.append(r % p)
            r //= p
        coords.reverse()
        return [owned(n, b, p, c)
                for n, b, p, c in zip(self.extents, self.blocks, self.grid, coords)]

    def layout(self):
        dims = "xyzw"[:len(self.extents)]
        # Layouts list dimensions innermost first after F.
        inner_first = dims if self.column_major_storage else dims[::-1]
        return "F," + ",".join(inner_first)

    def offsets(self, local):
        """(local index tuple, element offset) in storage order."""
        sizes = [len(ix) for ix in local]
        order = range(len(sizes)) if self.column_major_storage else reversed(range(len(sizes)))
        strides, s = [0] * len(sizes), 1
        for d in order:
            strides[d] = s
            s *= sizes[d]

        def walk(d, prefix):
            if d == len(sizes):
                yield tuple(prefix)
                return
            for i in range(sizes[d]):
                yield from walk(d + 1, prefix + [i])
        for li in walk(0, []):
            yield li, sum(i * st for i, st in zip(li, strides))


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class RedistributeAcrossNodes(unittest.TestCase):
    NODES = ["a", "b", "c"]

    def setUp(self):
        # A peer starved on a busy CI machine must not be marked down in the
        # middle of a redistribution (its re-hello makes a new session, and
        # data connections of the old one are refused until they relink):
        # nothing here depends on how fast a dead peer is noticed.
        self.cluster = cf.Cluster(ISOMETRYD, self.NODES, request="64KiB", extra_channels=CMA,
                                  timeout_ms=5000)
        self.cluster.start()
        self.clients = []

    killed = ()

    def tearDown(self):
        for c in self.clients:
            c.close()
        codes = self.cluster.stop()
        for name, code in codes.items():
            if name in self.killed:
                continue
            if code != 0:
                print(f"--- {name}\n" + self.cluster[name].log_text()[-4000:], file=sys.stderr)
            self.assertEqual(code, 0, f"{name} exited with {code}")

    def rank(self, node, job, rank, name, producer, local=False, on_file=False, grant=None):
        """Joins `rank` of `job` as `name` from a session on `node`; returns
        (client, storage, local indices). Private storage with `local`, a
        file of the node's DSK memory (its path as storage) with `on_file`."""
        c = self.cluster[node].client(name=f"{name}{rank}", local=local)
        self.clients.append(c)
        idx = job.local(rank)
        count = 1
        for ix in idx:
            count *= len(ix)
        data = bytearray(count * 4)
        if producer:
            for li, at in job.offsets(idx):
                struct.pack_into("<i", data, at * 4, value(tuple(ix[i] for ix, i in zip(idx, li))))
        inst = None
        if on_file:
            storage = os.path.join(self.cluster[node].dsk, f"{name}{rank}.bin")
            with open(storage, "wb") as f:
                f.write(bytes(data))
            inst = c.register_instance(0, [len(ix) for ix in idx], [("v", 4)], job.layout(),
                                       memory="dsk0", file=f"{name}{rank}.bin")
        elif local:
            storage = data
            rng = c.register_private(storage)
            if count:
                inst = c.register_instance(private_range=rng, bounds=[len(ix) for ix in idx],
                                           fields=[("v", 4)], layout=job.layout())
        else:
            storage = c.allocate("sys0", max(len(data), 1))
            c.write(storage, 0, bytes(data) or b"\0")
            if count:
                inst = c.register_instance(storage, bounds=[len(ix) for ix in idx],
                                           fields=[("v", 4)], layout=job.layout())
        c.join_distributed(name, job.extents, job.dists, job.grid, 4, rank, inst,
                           grant=grant_of(name) if grant is None else grant)
        return c, storage, idx

    def check_consumer(self, job, ranks):
        for c, storage, idx in ranks:
            count = 1
            for ix in idx:
                count *= len(ix)
            if isinstance(storage, str):
                with open(storage, "rb") as f:
                    raw = f.read()
            elif isinstance(storage, bytearray):
                raw = bytes(storage)
            else:
                raw = c.read(storage, 0, count * 4) if count else b""
            for li, at in job.offsets(idx):
                want = value(tuple(ix[i] for ix, i in zip(idx, li)))
                got = struct.unpack_from("<i", raw, at * 4)[0]
                self.assertEqual(got, want, f"global {tuple(ix[i] for ix, i in zip(idx, li))}")

    def place(self, job, name, producer, nodes, local=False, on_file=False):
        return [self.rank(nodes[r % len(nodes)], job, r, name, producer, local, on_file)
                for r in range(job.ranks())]

    def test_random_cases_over_three_nodes(self):
        rng = random.Random(18)
        kinds = ["block", "cyclic", ("block_cyclic", 2), ("block_cyclic", 3), ("block_cyclic", 5)]
        for case in range(6):
            dims = 1 + case % 3
            extents = [rng.randint(5, 23) for _ in range(dims)]

            def job():
                grid = [rng.randint(1, 4 if dims < 3 else 2) for _ in range(dims)]
                return Job(extents, [rng.choice(kinds) for _ in range(dims)], grid,
                           rng.random() < 0.5)
            prod, cons = job(), job()
            nodes_p = rng.sample(self.NODES, rng.randint(1, 3))
            nodes_c = rng.sample(self.NODES, rng.randint(1, 3))
            if set(nodes_p) == set(nodes_c) == {nodes_p[0]}:
                nodes_c = [n for n in self.NODES if n != nodes_p[0]][:1]
            with self.subTest(case=case, extents=extents, prod=(prod.dists, prod.grid),
                              cons=(cons.dists, cons.grid), nodes=(nodes_p, nodes_c)):
                p = self.place(prod, f"p{case}", True, nodes_p)
                q = self.place(cons, f"q{case}", False, nodes_c)
                starter = q[0][0] if case % 2 else p[-1][0]
                info = redistribute_granted(starter, f"p{case}", f"q{case}")
                self.assertEqual(info.state, "done")
                total = 4
                for n in extents:
                    total *= n
                self.assertEqual(info.bytes, total)
                self.check_consumer(cons, q)
                for c, _, _ in p + q:
                    self.clients.remove(c)
                    c.close()

    def test_private_consumer_on_another_node(self):
        prod = Job([40, 30], [("block_cyclic", 4), "block"], [2, 2], False)
        cons = Job([40, 30], ["block", ("block_cyclic", 7)], [1, 3], True)
        p = self.place(prod, "P", True, ["a"], local=True)
        q = self.place(cons, "Q", False, ["b", "c"], local=True)
        info = redistribute_granted(p[0][0], "P", "Q")
        self.assertEqual(info.state, "done")
        self.assertIn("across nodes", info.path)
        self.check_consumer(cons, q)

    def test_files_on_both_sides(self):
        # Producer ranks read from files on a and b; consumer ranks write
        # into existing files on c and a, in place.
        prod = Job([33, 20], ["cyclic", ("block_cyclic", 3)], [2, 2], True)
        cons = Job([33, 20], [("block_cyclic", 5), "block"], [3, 1], False)
        p = self.place(prod, "F", True, ["a", "b"], on_file=True)
        q = self.place(cons, "G", False, ["c", "a"], on_file=True)
        info = redistribute_granted(q[0][0], "F", "G")
        self.assertEqual(info.state, "done")
        self.check_consumer(cons, q)
        self.assertEqual(len(p), 4)

    def refusal_once(self, call, text, timeout_s=10):
        """The IsometryError `call` raises once its message has `text`."""
        deadline = time.monotonic() + timeout_s
        last = "it succeeded"
        while time.monotonic() < deadline:
            try:
                call()
            except IsometryError as e:
                if text in e.message:
                    return e
                last = f"{e.code}: {e.message}"
            time.sleep(0.05)
        self.fail(f"no refusal with {text!r} within {timeout_s} s (last: {last})")

    def test_membership_errors(self):
        job = Job([12, 8], ["block", "block"], [2, 1], False)
        whole = Job([12, 8], ["block", "block"], [1, 1], False)
        self.rank("a", job, 0, "m", True)
        dup = self.rank("b", job, 0, "m", True)  # rank 0 again, on another node
        w = self.rank("c", whole, 0, "w", False)
        with self.assertRaises(IsometryError) as e:
            redistribute_granted(w[0], "m", "w")
        self.assertEqual(e.exception.code, "FAILED_PRECONDITION")
        self.assertIn("rank 0", e.exception.message)
        self.assertIn("joined on node", e.exception.message)
        # Rank 1 missing once the duplicate has left (its daemon ends the
        # session when it sees the stream close).
        self.clients.remove(dup[0])
        dup[0].close()
        e = self.refusal_once(lambda: redistribute_granted(w[0], "m", "w"), "1 of its 2 ranks")
        self.assertEqual(e.code, "FAILED_PRECONDITION")
        # A different distribution under the same name on another node.
        other = Job([12, 8], ["cyclic", "block"], [2, 1], False)
        self.rank("b", other, 1, "m", True)
        with self.assertRaises(IsometryError) as e:
            redistribute_granted(w[0], "m", "w")
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("on node", e.exception.message)

    def test_rank_leaving_or_node_dying_fails_cleanly(self):
        prod = Job([64, 48], [("block_cyclic", 3), "block"], [2, 1], False)
        cons = Job([64, 48], ["block", "cyclic"], [1, 2], True)
        p = self.place(prod, "L", True, ["a", "b"])
        q = self.place(cons, "M", False, ["b", "c"])
        self.assertEqual(redistribute_granted(q[0][0], "L", "M").state, "done")
        # A consumer rank on c leaves: the instance ends there and on the
        # nodes c met; a later redistribution is refused, nothing hangs.
        self.clients.remove(q[1][0])
        q[1][0].close()
        e = self.refusal_once(lambda: redistribute_granted(p[0][0], "L", "M"), "'M'")
        self.assertIn(e.code, ("FAILED_PRECONDITION", "NOT_FOUND"))
        # Node b dies: its ranks are gone with it; a and c keep serving.
        self.killed = ("b",)
        self.cluster["b"].kill()
        with self.assertRaises(IsometryError) as e:
            redistribute_granted(p[0][0], "L", "M")
        self.assertIn(e.exception.code, ("FAILED_PRECONDITION", "NOT_FOUND", "UNAVAILABLE"))
        c = self.cluster["c"].client()
        self.clients.append(c)
        a = c.allocate("sys0", 4096)
        c.write(a, 0, b"\x07" * 4096)
        self.assertEqual(c.read(a, 0, 4096), b"\x07" * 4096)

    def test_a_same_named_job_with_another_grant_is_another_job(self):
        # Issue #48: gRPC jobs share one namespace of names on every node.
        # An attacker on c names the victim's job "V" (ranks on a and b)
        # with a grant of its own: the victim's ranks are not shown to it,
        # not tied to it, and its leaving does not end the victim's job.
        prod = Job([16, 8], ["block", "block"], [2, 1], False)
        whole = Job([16, 8], ["block", "block"], [1, 1], False)
        self.place(prod, "V", True, ["a", "b"])
        w = self.rank("a", whole, 0, "W", False)
        evil_grant = b"the attacker's own grant, 16+ bytes"
        evil = self.rank("c", prod, 0, "V", True, grant=evil_grant)
        loot = self.rank("c", whole, 0, "loot", False, grant=evil_grant)
        with self.assertRaises(IsometryError) as e:
            evil[0].redistribute("V", "loot", consumer_grant=evil_grant)
        self.assertEqual(e.exception.code, "FAILED_PRECONDITION")
        self.assertIn("1 of its 2 ranks", e.exception.message)
        with self.assertRaises(IsometryError) as e:  # without the victim's grant
            loot[0].redistribute("V", "loot", producer_grant=evil_grant)
        self.assertIn(e.exception.code, ("FAILED_PRECONDITION", "PERMISSION_DENIED"))
        for c in (evil[0], loot[0]):
            self.clients.remove(c)
            c.close()
        time.sleep(0.3)  # an "ended" word from c would have arrived by now
        info = redistribute_granted(w[0], "V", "W")
        self.assertEqual(info.state, "done")
        self.check_consumer(whole, [w])


if __name__ == "__main__":
    unittest.main()
