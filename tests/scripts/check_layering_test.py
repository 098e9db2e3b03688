"""The layering table says what docs/development/style.md's dependency direction says."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import check_layering as cl  # noqa: E402


class CheckIncludeTest(unittest.TestCase):
    def refused(self, src, inc):
        self.assertIsNotNone(cl.check_include(src, inc), f"{src} -> {inc}")

    def allowed(self, src, inc):
        self.assertIsNone(cl.check_include(src, inc), f"{src} -> {inc}")

    def test_lower_layers_never_include_higher_ones(self):
        self.refused("core/status.h", "layout/layout.h")
        self.refused("layout/compiler.cc", "planner/planner.h")
        self.refused("planner/planner.cc", "config/runtime_config.h")
        self.refused("planner/planner.cc", "channels/channel.h")
        self.refused("channels/channel.h", "planner/topology.h")
        self.refused("channels/channel.h", "daemon/runtime/runtime.h")
        self.refused("daemon/runtime/runtime.cc", "daemon/node/node.h")
        self.refused("daemon/node/node.cc", "daemon/server/convert.h")
        self.refused("client/cpp/isometry_client.cc", "daemon/node/node.h")
        self.allowed("layout/compiler.cc", "core/status.h")
        self.allowed("channels/channel.h", "layout/copy_program.h")
        self.allowed("daemon/node/node.cc", "daemon/runtime/runtime.h")
        self.allowed("tools/bench/local_scenarios.cc", "daemon/runtime/runtime.h")

    def test_proto_types_stay_in_services_clients_and_tools(self):
        for src in ("daemon/runtime/runtime.cc", "daemon/node/node.h",
                    "planner/planner.cc", "net/frame.cc", "channels/tcp/tcp_channel.cc",
                    "config/x.cc"):
            self.refused(src, "isometry.pb.h")
            self.refused(src, "grpcpp/grpcpp.h")
            self.refused(src, "google/protobuf/message.h")
            self.refused(src, "proto/local_wire.h")
        for src in ("daemon/server/convert.h", "daemon/cluster/cluster.h",
                    "daemon/main.cc", "client/cpp/isometry_client.cc",
                    "tools/isoctl/render.h", "tests/integration/daemon_fixture.h"):
            self.allowed(src, "isometry.grpc.pb.h")
            self.allowed(src, "grpcpp/grpcpp.h")

    def test_the_peer_protocol_is_the_cluster_layers_alone(self):
        for src in ("daemon/server/grpc_service.cc", "daemon/main.cc",
                    "client/cpp/isometry_client.cc", "tools/isoctl/render.h",
                    "fuzz/request_checks.h", "daemon/node/node.h"):
            self.refused(src, "isometry_peer.pb.h")
            self.refused(src, "isometry_peer.grpc.pb.h")
        for src in ("daemon/cluster/cluster_impl.h", "daemon/cluster/peer_wire.h",
                    "tests/unit/peer_wire_test.cc"):
            self.allowed(src, "isometry_peer.grpc.pb.h")
            self.allowed(src, "isometry_peer.pb.h")

    def test_no_file_includes_a_source_file(self):
        self.refused("daemon/node/node.cc", "daemon/node/node_copy.cc")
        self.refused("tests/unit/layout_test.cc", "layout/compiler.cc")
        self.refused("tools/bench/peers.cc", "tools/bench/mpi_datatype.c")
        self.allowed("daemon/node/node.cc", "daemon/node/node.h")

    def test_a_channel_folder_uses_no_other_channel(self):
        self.refused("channels/disk/disk_channel.cc", "channels/tcp/tcp_channel.h")
        self.allowed("channels/disk/disk_channel.cc", "channels/channel.h")
        self.allowed("channels/disk/disk_channel.cc", "channels/disk/uring.h")
        self.allowed("channels/channel_factory.cc", "channels/disk/disk_channel.h")

    def test_the_data_plane_sits_below_the_channels(self):
        self.refused("net/peer_link.h", "channels/channel.h")
        self.refused("net/rdma/rdma_stream.h", "channels/rdma/rdma_channel.h")
        self.refused("net/data_plane.cc", "daemon/cluster/cluster_impl.h")
        self.refused("net/rdma/rdma_probe.cc", "procmem/cma_copy.h")
        self.refused("daemon/runtime/runtime.cc", "net/peer_link.h")
        self.allowed("net/peer_link.h", "layout/copy_program.h")
        self.allowed("net/rdma/rdma_probe.h", "config/rdma_config.h")
        self.allowed("channels/tcp/tcp_channel.h", "net/peer_link.h")
        self.allowed("channels/rdma/rdma_channel.h", "net/rdma/rdma_stream.h")
        self.allowed("daemon/cluster/cluster_impl.h", "net/data_plane.h")
        self.allowed("tests/unit/frame_test.cc", "net/frame.h")

    def test_the_daemon_asks_kinds_through_the_factory(self):
        self.refused("daemon/runtime/runtime_calibration.cc", "channels/cma/cma_channel.h")
        self.refused("daemon/runtime/runtime.cc", "channels/disk/disk_channel.h")
        self.refused("daemon/node/node.cc", "channels/memcpy/memcpy_channel.h")
        self.allowed("daemon/runtime/runtime.cc", "channels/channel_factory.h")
        self.allowed("daemon/runtime/disk_endpoint.h", "channels/disk/disk_file.h")
        self.allowed("tests/unit/disk_channel_test.cc", "channels/disk/disk_channel.h")

    def test_only_channels_name_a_kind(self):
        switch = "    case ChannelKind::kCma:"
        test = "  if (c.kind == ChannelKind::kRemoteMemcpy) {"
        for src in ("config/runtime_config.cc", "daemon/cluster/cross_plan.cc",
                    "daemon/runtime/local_topology.cc", "planner/full_planner.cc"):
            self.assertIsNotNone(cl.check_kind_use(src, switch), src)
            self.assertIsNotNone(cl.check_kind_use(src, test), src)
        for src in ("channels/channel_factory.cc", "channels/cuda/gpu_resolve.cc",
                    "core/channel_kind.cc", "tests/unit/toy_channel_test.cc",
                    "tools/bench/gpu_bench.cc", "planner/testing/synthetic_graphs.cc"):
            self.assertIsNone(cl.check_kind_use(src, test), src)
        # A field's default names a value but decides nothing.
        self.assertIsNone(cl.check_kind_use("planner/topology.h",
                                            "  ChannelKind kind = ChannelKind::kMemcpy;"))
        self.assertIsNone(cl.check_kind_use("config/x.cc", "  ChannelKind kind = c.kind;"))

    def test_leaves(self):
        self.refused("examples/local_copy.cc", "daemon/node/node.h")
        self.allowed("examples/local_copy.cc", "daemon/runtime/runtime.h")
        self.refused("tests/unit/x_test.cc", "fuzz/request_checks.h")
        self.allowed("tests/unit/x_test.cc", "unit/test_util.h")
        self.refused("daemon/main.cc", "tools/common/daemon_process.h")

    def test_unknown_folders_must_be_added_to_the_table(self):
        self.refused("newlayer/a.cc", "core/status.h")
        self.refused("core/a.cc", "a_header_in_no_layer.h")

    def test_the_tree_is_clean(self):
        root = os.path.join(os.path.dirname(__file__), "..", "..")
        self.assertEqual(list(cl.violations(os.path.abspath(root))), [])


if __name__ == "__main__":
    unittest.main()
