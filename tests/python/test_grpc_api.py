"""The gRPC surface as a client written from README + isometry.proto sees it
(issue #12): streaming Read/Write for large data, health and reflection,
completion events, and the README's worked layout example.

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_grpc_api      # in tests/python

Each test case starts its own daemon in a fresh temporary directory.
"""

import os
import random
import shutil
import socket
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

_IMPORT_ERROR = None
try:
    import grpc
    from google.protobuf import descriptor_pb2

    import isometry
    from isometry import IsometryError
    from isometry import isometry_pb2 as pb
    from isometry import isometry_pb2_grpc as pb_grpc
    from isometry import reflection_v1_pb2 as refl
except ImportError as e:  # reported by setUp (only when the tests are not skipped)
    _IMPORT_ERROR = e

SKIP_REASON = "ISOMETRYD is not set: point it at the isometryd binary (and ISOMETRY_PYTHONPATH)"
if not ISOMETRYD:
    print(f"test_grpc_api: skipped: {SKIP_REASON}", file=sys.stderr)

MiB = 1 << 20

CONFIG = """\
[daemon]
local_socket = "{dir}/local.sock"
grpc_socket = "{dir}/grpc.sock"
state_dir = "{dir}/state"
log_level = "warn"
shutdown_grace_ms = 2000
calibrate = false
{extra_daemon}
[[memory]]
name = "sys0"
kind = "SYS"
pool = "96MiB"
client_quota = "48MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
{extra}"""

SERVING = 1


def _health_request(service):
    """grpc.health.v1.HealthCheckRequest{service} in wire form (field 1)."""
    name = service.encode()
    assert len(name) < 128
    return b"\x0a" + bytes([len(name)]) + name if name else b""


def _health_status(channel, service):
    """The ServingStatus a Check answers (HealthCheckResponse field 1), or
    the gRPC status code name when the call fails."""
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    try:
        reply = check(_health_request(service), timeout=5)
    except grpc.RpcError as e:
        return e.code().name
    return reply[1] if reply[:1] == b"\x08" else 0


def _reflect(channel, package, requests):
    """Answers of grpc.reflection.<package>.ServerReflection to `requests`
    (v1 and v1alpha share the messages, so one set of stubs speaks both)."""
    call = channel.stream_stream(
        f"/grpc.reflection.{package}.ServerReflection/ServerReflectionInfo",
        request_serializer=refl.ServerReflectionRequest.SerializeToString,
        response_deserializer=refl.ServerReflectionResponse.FromString,
    )
    return list(call(iter(requests), timeout=10))


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DaemonCase(unittest.TestCase):
    """A daemon per test and one client, self.c."""

    extra = ""
    extra_daemon = ""

    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package and stubs ({_IMPORT_ERROR})")
        template = CONFIG.replace("{extra}", self.extra).replace(
            "{extra_daemon}", self.extra_daemon
        )
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, template, "isometry-grpcapi-"
            )
        except AssertionError as e:
            self.fail(str(e))
        self.clients = []
        self.c = self.client("main")

    def client(self, name):
        c = isometry.Client(self.daemon.socket, name=name)
        self.clients.append(c)
        return c

    def tearDown(self):
        for c in self.clients:
            c.close()
        rc = self.daemon.stop()
        log = self.daemon.log_text()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0, f"isometryd exited with {rc}:\n{log}")

    def stub(self, channel_options=None):
        channel = grpc.insecure_channel("unix:" + self.daemon.socket, options=channel_options or [])
        self.addCleanup(channel.close)
        return channel, pb_grpc.IsometryStub(channel)

    def md(self, c):
        return (("isometry-session", c.session),)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class HealthAndReflection(DaemonCase):
    def test_health_answers_for_the_client_service(self):
        channel, _ = self.stub()
        self.assertEqual(_health_status(channel, ""), SERVING)
        self.assertEqual(_health_status(channel, "isometry.v1.Isometry"), SERVING)
        # No peers configured: the peer API is not served here.
        self.assertEqual(_health_status(channel, "isometry.v1.IsometryPeer"), "NOT_FOUND")

    def test_reflection_v1_and_v1alpha_describe_the_api(self):
        channel, _ = self.stub()
        requests = [
            refl.ServerReflectionRequest(list_services=""),
            refl.ServerReflectionRequest(file_containing_symbol="isometry.v1.Isometry"),
            refl.ServerReflectionRequest(file_containing_symbol="isometry.v1.NoSuchThing"),
            refl.ServerReflectionRequest(file_by_filename="isometry.proto"),
        ]
        for package in ("v1", "v1alpha"):
            with self.subTest(package=package):
                answers = _reflect(channel, package, requests)
                self.assertEqual(len(answers), len(requests))
                names = {s.name for s in answers[0].list_services_response.service}
                self.assertIn("isometry.v1.Isometry", names)
                self.assertNotIn("isometry.v1.IsometryPeer", names)
                for answer in (answers[1], answers[3]):
                    files = [
                        descriptor_pb2.FileDescriptorProto.FromString(b)
                        for b in answer.file_descriptor_response.file_descriptor_proto
                    ]
                    self.assertEqual(files[0].name, "isometry.proto")
                    service = next(s for s in files[0].service if s.name == "Isometry")
                    methods = {m.name: m for m in service.method}
                    self.assertTrue(methods["Attach"].server_streaming)
                self.assertEqual(answers[2].error_response.error_code, 5)  # NOT_FOUND
        v1_names = {
            s.name for s in _reflect(channel, "v1", requests[:1])[0].list_services_response.service
        }
        self.assertIn("grpc.reflection.v1.ServerReflection", v1_names)
        self.assertIn("grpc.reflection.v1alpha.ServerReflection", v1_names)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class PeerApiOnlyWithPeers(DaemonCase):
    """A node with one (absent) peer: the TCP port serves the peer API only,
    the unix socket the client API only."""

    def setUp(self):
        self.port = _free_port()
        secret_dir = os.path.join("/tmp", f"isometry-grpcapi-secret-{os.getpid()}")
        os.makedirs(secret_dir, exist_ok=True)
        self.addCleanup(shutil.rmtree, secret_dir, True)
        secret = os.path.join(secret_dir, "cluster.secret")
        with open(secret, "w") as f:
            f.write("correct horse battery staple 42\n")
        os.chmod(secret, 0o600)
        self.extra_daemon = f'grpc_tcp = "127.0.0.1:{self.port}"\n'
        self.extra = (
            f'\n[cluster]\nnode_name = "a"\nsecret_file = "{secret}"\n'
            f'data_listen = "127.0.0.1:0"\n'
            f'\n[[peer]]\nname = "b"\naddress = "127.0.0.1:{_free_port()}"\n'
        )
        super().setUp()

    def test_health_and_reflection_per_server(self):
        unix, _ = self.stub()
        self.assertEqual(_health_status(unix, "isometry.v1.Isometry"), SERVING)
        self.assertEqual(_health_status(unix, "isometry.v1.IsometryPeer"), "NOT_FOUND")
        tcp = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.addCleanup(tcp.close)
        self.assertEqual(_health_status(tcp, ""), SERVING)
        self.assertEqual(_health_status(tcp, "isometry.v1.IsometryPeer"), SERVING)
        self.assertEqual(_health_status(tcp, "isometry.v1.Isometry"), "NOT_FOUND")
        names = {
            s.name
            for s in _reflect(tcp, "v1", [refl.ServerReflectionRequest(list_services="")])[
                0
            ].list_services_response.service
        }
        self.assertIn("isometry.v1.IsometryPeer", names)
        self.assertNotIn("isometry.v1.Isometry", names)


if __name__ == "__main__":
    unittest.main()
