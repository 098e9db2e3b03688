"""What `cmake --install` gives a user. The C++ client as a user outside the tree gets it: `cmake --install
--component client` into a fresh prefix, then a program built against that
prefix with find_package(Isometry) and, separately, with pkg-config (both
the shared library libisometry-client.so.0) and with the static archives
(Isometry::client_static), each run against a real daemon. Fails when a
public header includes one that is not installed, the library lacks its
SONAME or exports a symbol that is not the public API (abseil, protobuf,
the client's internals), an archive is missing or out of link order, or a
package file names the wrong directory.
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

ISOMETRYD = os.environ.get("ISOMETRYD", "")
BUILD_DIR = os.environ.get("ISOMETRY_BUILD_DIR", "")
CONSUMER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "consumer")

MEMORY = """
[[memory]]
name = "sys0"
pool = "64MiB"
[[channel]]
name = "memcpy0"
"""


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def dynamic_section(path):
    return run(["readelf", "-d", path])


def qualified_path(name):
    """["isometry", "client", "Client", "Connect"] for
    "isometry::client::Client::Connect(isometry::client::ClientOptions const&)":
    the name before its parameters, without template arguments or tags."""
    head = re.sub(r"\[abi:\w+\]", "", name)
    depth, cut = 0, len(head)
    for i, c in enumerate(head):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and not head[:i].endswith("operator"):
            cut = i
            break
    head = head[:cut]
    while re.search(r"<[^<>]*>", head):
        head = re.sub(r"<[^<>]*>", "", head)
    return [p for p in head.split("::") if p]


@unittest.skipUnless(ISOMETRYD and BUILD_DIR, "ISOMETRYD and ISOMETRY_BUILD_DIR are not set (ctest sets them)")
class ClientInstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="iso-install-")
        cls.prefix = os.path.join(cls.work, "prefix")
        run(["cmake", "--install", BUILD_DIR, "--component", "client", "--prefix", cls.prefix])
        cls.directory, cls.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, MEMORY, "iso-install-daemon-")

    @classmethod
    def tearDownClass(cls):
        try:
            cls.daemon.stop()
        finally:
            cls.daemon.close()
            shutil.rmtree(cls.directory, ignore_errors=True)
            shutil.rmtree(cls.work, ignore_errors=True)

    def run_consumer(self, program, shared=True):
        needed = dynamic_section(program)
        if shared:
            self.assertIn("[libisometry-client.so.0]", needed, "linked the shared library")
        else:
            self.assertNotIn("libisometry-client", needed, "linked the archives")
        out = run([program, os.path.join(self.directory, "local.sock"),
                   os.path.join(self.directory, "grpc.sock")], timeout=60)
        self.assertRegex(out, r"^ok: 600000 bytes via memcpy0$")

    def library(self):
        hits = [os.path.join(r, f) for r, _, files in os.walk(self.prefix) for f in files
                if f.startswith("libisometry-client.so")
                and not os.path.islink(os.path.join(r, f))]
        self.assertEqual(len(hits), 1, f"one libisometry-client.so.* file (links aside): {hits}")
        return hits[0]

    def test_installs_the_client_component_only(self):
        found = []
        for root, _, files in os.walk(self.prefix):
            found += [os.path.relpath(os.path.join(root, f), self.prefix) for f in files]
        self.assertFalse([f for f in found if f.endswith(("isometryd", "isoctl", ".service"))],
                         "the client component installs no daemon, CLI or unit")
        for wanted in ("include/isometry/client/cpp/isometry_client.h",
                       "include/isometry/client/cpp/inspector.h",
                       "include/isometry/core/status.h"):
            self.assertIn(wanted, found)
        self.assertTrue(any(f.endswith("cmake/Isometry/IsometryConfig.cmake") for f in found))
        self.assertTrue(any(f.endswith("pkgconfig/isometry-client.pc") for f in found))
        self.assertTrue(any(f.endswith("pkgconfig/isometry-client-static.pc") for f in found))
        # The library, its SONAME link and the development link beside it.
        library = os.path.relpath(self.library(), self.prefix)
        self.assertRegex(library, r"^lib[^/]*/libisometry-client\.so\.0\.\d+\.\d+$")
        libdir = os.path.join(self.prefix, os.path.dirname(library))
        for link in ("libisometry-client.so.0", "libisometry-client.so"):
            self.assertTrue(os.path.islink(os.path.join(libdir, link)), link)

    def test_shared_library_has_its_soname(self):
        self.assertIn("Library soname: [libisometry-client.so.0]", dynamic_section(self.library()))

    def test_shared_library_exports_the_public_api_only(self):
        """Every symbol the library defines for others is a class or
        function of the installed headers: each name on its qualified path
        (namespace, class, member) is one the headers declare, and none is
        abseil's, protobuf's, gRPC's, the generated messages' or an Impl."""
        words = set()
        for root, _, files in os.walk(os.path.join(self.prefix, "include")):
            for f in files:
                with open(os.path.join(root, f)) as h:
                    words |= set(re.findall(r"[A-Za-z_]\w*", h.read()))
        out = run(["nm", "-D", "--defined-only", "-C", self.library()])
        exported, strangers = [], []
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) < 3 or parts[1] == "A":  # A: the version node itself
                continue
            name = parts[2].split("@")[0]
            exported.append(name)
            path = qualified_path(name)
            if (path[0] != "isometry" or "Impl" in path or path[:2] == ["isometry", "v1"]
                    or any(p.lstrip("~") not in words for p in path if not p.startswith("operator"))):
                strangers.append(name)
        self.assertFalse(strangers, "exported but not declared in the installed headers")
        self.assertIn("isometry::client::Client::Connect(isometry::client::ClientOptions const&)",
                      exported)
        self.assertIn("isometry::FieldSpace::Make", "\n".join(exported))
        for foreign in ("absl::", "google::", "grpc::", "grpc_", "XXH"):
            self.assertFalse([n for n in exported if n.startswith(foreign)], foreign)

    def test_find_package_build_runs_a_copy(self):
        build = os.path.join(self.work, "cmake-build")
        run(["cmake", "-S", CONSUMER, "-B", build, "-G", "Ninja",
             f"-DCMAKE_PREFIX_PATH={self.prefix}", "-DCMAKE_BUILD_TYPE=Release"])
        run(["cmake", "--build", build])
        self.run_consumer(os.path.join(build, "consumer"))

    def test_find_package_static_build_runs_a_copy(self):
        build = os.path.join(self.work, "cmake-build-static")
        run(["cmake", "-S", CONSUMER, "-B", build, "-G", "Ninja", "-DCONSUMER_STATIC=ON",
             f"-DCMAKE_PREFIX_PATH={self.prefix}", "-DCMAKE_BUILD_TYPE=Release"])
        run(["cmake", "--build", build])
        self.run_consumer(os.path.join(build, "consumer"), shared=False)

    def test_pkg_config_build_runs_a_copy(self):
        pcdirs = [os.path.dirname(os.path.join(root, f))
                  for root, _, files in os.walk(self.prefix) for f in files
                  if f == "isometry-client.pc"]
        self.assertEqual(len(pcdirs), 1)
        env = dict(os.environ, PKG_CONFIG_PATH=pcdirs[0])
        flags = run(["pkg-config", "--cflags", "--libs", "isometry-client"], env=env).split()
        self.assertIn("-lisometry-client", flags)
        # The shared library's users link abseil's status and nothing else.
        self.assertFalse([f for f in flags if re.match(r"-l(grpc|gpr|protobuf|xxhash|isometry_)", f)],
                         flags)
        libdir = run(["pkg-config", "--variable=libdir", "isometry-client"], env=env).strip()
        program = os.path.join(self.work, "consumer-pc")
        run(["g++", "-O1", os.path.join(CONSUMER, "consumer.cc"), "-o", program, *flags,
             f"-Wl,-rpath,{libdir}"])
        self.run_consumer(program)


@unittest.skipUnless(BUILD_DIR, "ISOMETRY_BUILD_DIR is not set (ctest sets it)")
class FullInstallTest(unittest.TestCase):
    """`cmake --install` of everything into a staging root (DESTDIR), as a
    package build does: the config is written once and kept after that,
    and the man pages, completions, proto and dashboard are in place."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="iso-destdir-")
        self.addCleanup(shutil.rmtree, self.root, True)

    def install(self):
        return run(["cmake", "--install", BUILD_DIR], env=dict(os.environ, DESTDIR=self.root))

    def find(self, suffix):
        hits = [os.path.join(r, f) for r, _, files in os.walk(self.root) for f in files
                if os.path.join(r, f).endswith(suffix)]
        self.assertEqual(len(hits), 1, f"{suffix}: {hits}")
        return hits[0]

    def test_config_is_written_once_and_kept(self):
        self.install()
        configs = [os.path.join(r, f) for r, _, files in os.walk(self.root) for f in files
                   if f == "isometryd.toml" and "/share/" not in r]
        self.assertEqual(len(configs), 1, configs)
        config = configs[0]
        with open(config, "a") as f:
            f.write("# the operator's change\n")
        out = self.install()
        self.assertIn("Keeping: ", out)
        with open(config) as f:
            self.assertTrue(f.read().endswith("# the operator's change\n"))

    def test_documentation_and_interfaces_are_installed(self):
        self.install()
        for page, name in (("man1/isoctl.1", "isoctl \\- inspect and drive the local isometryd"),
                           ("man8/isometryd.8", "isometryd \\- the Isometry per-node data"),
                           ("man5/isometryd.toml.5", "daemon.local_socket")):
            with open(self.find(page)) as f:
                self.assertIn(name, f.read())
        with open(self.find("lib/systemd/system/isometryd.service")) as f:
            self.assertIn("Documentation=man:isometryd(8) man:isoctl(1) man:isometryd.toml(5)",
                          f.read())
        with open(self.find("share/isometry/proto/isometry.proto")) as f:
            self.assertIn("service Isometry", f.read())
        self.find("share/isometry/grafana/isometry.json")
        self.find("share/bash-completion/completions/isoctl")
        self.find("share/zsh/vendor-completions/_isoctl")
        self.find("share/fish/vendor_completions.d/isoctl.fish")

    def test_unit_hardening_does_not_regress(self):
        """systemd's own offline score of the installed unit: a change that
        loosens the sandbox fails here (4.7 before UMask, ProtectHostname,
        ProtectKernelLogs, RestrictSUIDSGID, PrivateMounts and
        SystemCallArchitectures; 4.0 before SystemCallFilter, RemoveIPC and
        CAP_SYS_PTRACE moved to a drop-in; 2.2 since). What stays open is
        explained in docs/operations/systemd.md, "What stays open"."""
        analyze = shutil.which("systemd-analyze")
        if not analyze:
            self.skipTest("no systemd-analyze on this machine")
        self.install()
        unit = self.find("lib/systemd/system/isometryd.service")
        out = run([analyze, "security", "--offline=true", "--no-pager", unit])
        score = re.search(r"Overall exposure level for isometryd.service: ([0-9.]+)", out)
        self.assertIsNotNone(score, out[-2000:])
        self.assertLessEqual(float(score.group(1)), 2.5, out[-3000:])
        with open(unit) as f:
            text = f.read()
        for line in ("UMask=0027", "NoNewPrivileges=yes", "RemoveIPC=yes",
                     "SystemCallErrorNumber=EPERM", "\nCapabilityBoundingSet=\n"):
            self.assertIn(line, text)
        self.assertRegex(text, r"\nSystemCallFilter=@system-service ")
        self.assertNotIn("\nAmbientCapabilities=", text, "CAP_SYS_PTRACE is the drop-in's")
        # The opt-in drop-in: installed, not active (not under the unit's .d/).
        with open(self.find("share/isometry/isometryd-cma.conf")) as f:
            dropin = f.read()
        self.assertIn("\nAmbientCapabilities=CAP_SYS_PTRACE\n", dropin)
        self.assertIn("\nCapabilityBoundingSet=CAP_SYS_PTRACE\n", dropin)
        self.assertNotIn("@CMAKE_", dropin)
        self.assertFalse([r for r, _, _ in os.walk(self.root) if r.endswith("isometryd.service.d")])


if __name__ == "__main__":
    unittest.main()
