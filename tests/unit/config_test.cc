#include <catch2/catch.hpp>

#include "channels/added_channels.h"
#include "config/config_parser.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {
std::string ErrorOf(std::string_view toml) {
  auto r = ParseRuntimeConfig(toml, "test.toml");
  return r.ok() ? "" : std::string(r.status().message());
}
}  // namespace

TEST_CASE("the embedded default config parses to a single node with host memories") {
  auto c = ParseRuntimeConfig(EmbeddedDefaultConfig(), "default");
  REQUIRE(c.ok());
  CHECK(c->memories.size() == 3);
  CHECK(c->channels.size() == 2);
  CHECK(c->channels[0].kind == ChannelKind::kMemcpy);
  CHECK(c->channels[1].kind == ChannelKind::kCma);  // client process memory
  CHECK(c->space_threshold == 32ull << 20);
  CHECK(DefaultRuntimeConfig().memories[1].name == "reg0");
}

TEST_CASE("sizes parse with binary and decimal units") {
  CHECK(*ParseByteSize("4096") == 4096);
  CHECK(*ParseByteSize("64KiB") == 65536);
  CHECK(*ParseByteSize("32MiB") == 32ull << 20);
  CHECK(*ParseByteSize("1.5GiB") == 3ull << 29);
  CHECK(*ParseByteSize("2GB") == 2000000000ull);
  CHECK(!ParseByteSize("lots").ok());
  CHECK(!ParseByteSize("3 parsecs").ok());
}

TEST_CASE("config errors name the key and the line") {
  CHECK_THAT(ErrorOf("[runtime]\nspace_treshold = 5\n"),
             Catch::Contains("test.toml:2: key 'runtime.space_treshold': unknown key"));
  CHECK_THAT(ErrorOf("[runtime]\nslots_per_buffer = 0\n"),
             Catch::Contains("test.toml:2: key 'runtime.slots_per_buffer'"));
  CHECK_THAT(ErrorOf("[runtime]\nspace_threshold = \"big\"\n"),
             Catch::Contains("key 'runtime.space_threshold'"));
  // Transfer ids carry the node in 24 bits.
  CHECK_THAT(ErrorOf("[runtime]\nnode = 16777216\n"),
             Catch::Contains("test.toml:2: key 'runtime.node'"));
  CHECK_THAT(ErrorOf("[[memory]]\nname = \"a\"\nkind = \"TAPE\"\n"),
             Catch::Contains("test.toml:3: key 'memory.kind': unknown kind 'TAPE'"));
  CHECK_THAT(ErrorOf("[runtime\n"), Catch::Contains("test.toml:1"));
  CHECK_THAT(
      ErrorOf("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\nedges = [[\"a\", \"b\"]]\n"),
      Catch::Contains("unknown memory 'b'"));
  CHECK_THAT(ErrorOf("[[memory]]\nname = \"a\"\n"), Catch::Contains("no [[channel]]"));
  // A float where an integer belongs is refused, not cast (4e96 does not
  // fit an integer: config_fuzzer found the cast undefined).
  CHECK_THAT(ErrorOf("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\nthreads = 40e96\n"),
             Catch::Contains("key 'channel.threads': must be an integer"));
  CHECK_THAT(ErrorOf("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\nthreads = 2.0\n"),
             Catch::Contains("must be an integer"));
}

TEST_CASE("a gRPC session's unread events are bounded by a size in range") {
  auto c = ParseConfig(EmbeddedDefaultConfig(), "default");
  REQUIRE(c.ok());
  CHECK(c->daemon.max_attach_backlog_bytes == 1ull << 20);
  CHECK_THAT(ErrorOf("[daemon]\nmax_attach_backlog_bytes = 100\n"),
             Catch::Contains("test.toml:2: key 'daemon.max_attach_backlog_bytes': must be 4KiB"));
  CHECK_THAT(ErrorOf("[daemon]\n\nmax_attach_backlog_bytes = \"2GiB\"\n"),
             Catch::Contains("test.toml:3: key 'daemon.max_attach_backlog_bytes'"));
  auto ok = ParseConfig(
      "[daemon]\nmax_attach_backlog_bytes = \"64KiB\"\n[[memory]]\nname = \"a\"\n"
      "[[channel]]\nname = \"c\"\n",
      "test.toml");
  REQUIRE(ok.ok());
  CHECK(ok->daemon.max_attach_backlog_bytes == 64u << 10);
}

TEST_CASE("channels take rate limits, threads and explicit edges") {
  auto c = ParseRuntimeConfig(R"(
[runtime]
space_threshold = "8MiB"
[[memory]]
name = "a"
[[memory]]
name = "b"
kind = "REG"
[[channel]]
name = "up"
threads = 1
rate_limit = "1GiB"
edges = [["a", "b"]]
[[channel]]
name = "down"
edges = [["b", "a"]]
)",
                              "x");
  REQUIRE(c.ok());
  CHECK(c->space_threshold == 8ull << 20);
  CHECK(c->channels[0].rate_limit_bytes_per_s == 1ull << 30);
  CHECK(c->channels[0].threads == 1);
  CHECK(c->channels[1].edges.size() == 1);
  CHECK(c->memories[1].kind == MemoryKind::kReg);
}

TEST_CASE("a cma channel is configured by its kind and threads") {
  auto c = ParseRuntimeConfig(R"(
[[memory]]
name = "a"
[[channel]]
name = "m"
[[channel]]
name = "cma0"
kind = "cma"
threads = 3
)",
                              "x");
  REQUIRE(c.ok());
  CHECK(c->channels[1].kind == ChannelKind::kCma);
  CHECK(c->channels[1].threads == 3);
  CHECK(c->channels[1].edges.empty());  // its edges: channel_edges_test
  // What its kind forbids (edges, a rate limit) is the descriptor's to
  // refuse: channel_edges_test.
}

TEST_CASE("the daemon section: sockets, modes, rings, with errors that name the key") {
  auto c = ParseConfig(R"(
[daemon]
local_socket = "/tmp/x/local.sock"
grpc_socket = "/tmp/x/grpc.sock"
grpc_tcp = "127.0.0.1:7470"
socket_group = "isometry"
socket_mode = "0600"
log_level = "debug"
sq_entries = 64
cq_entries = 128
ring_poll_us = 0
cpu_latency_us = 0
direct_reads = false
[[memory]]
name = "sys0"
pool = "64MiB"
client_quota = "16MiB"
hugetlb = true
[[channel]]
name = "memcpy0"
)",
                       "d.toml");
  REQUIRE(c.ok());
  CHECK(c->daemon.local_socket == "/tmp/x/local.sock");
  CHECK(c->daemon.grpc_tcp == "127.0.0.1:7470");
  CHECK(c->daemon.socket_mode == 0600);
  CHECK(c->daemon.sq_entries == 64);
  CHECK(c->daemon.ring_poll_us == 0);
  CHECK(c->daemon.cpu_latency_us == 0u);
  CHECK_FALSE(c->daemon.direct_reads);
  CHECK(c->runtime.memories[0].pool_bytes == 64u << 20);
  CHECK(c->runtime.memories[0].client_quota == 16u << 20);
  CHECK(c->runtime.memories[0].hugetlb);
  auto daemon_error = [](const char* body) {
    auto r = ParseConfig(
        std::string(body) + "\n[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n", "d.toml");
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  CHECK_THAT(daemon_error("[daemon]\nsocket_mode = \"rw\""),
             Catch::Contains("d.toml:2: key 'daemon.socket_mode'"));
  CHECK_THAT(daemon_error("[daemon]\nsq_entries = 100"), Catch::Contains("powers of two"));
  CHECK_THAT(daemon_error("[daemon]\nlog_level = \"loud\""),
             Catch::Contains("daemon.log_level 'loud'"));
  CHECK_THAT(daemon_error("[daemon]\nlocal_socket = \"/a\"\ngrpc_socket = \"/a\""),
             Catch::Contains("same path"));
  CHECK_THAT(daemon_error("[daemon]\nlisten = 1"), Catch::Contains("unknown key"));
  CHECK_THAT(daemon_error("[daemon]\nring_poll_us = 100001"),
             Catch::Contains("key 'daemon.ring_poll_us'"));
  CHECK_THAT(daemon_error("[daemon]\ncpu_latency_us = -1"),
             Catch::Contains("key 'daemon.cpu_latency_us'"));
  CHECK_THAT(daemon_error("[daemon]\ncpu_latency_us = 1000001"),
             Catch::Contains("key 'daemon.cpu_latency_us'"));
  CHECK_THAT(daemon_error("[daemon]\ndirect_reads = 1"),
             Catch::Contains("key 'daemon.direct_reads'"));
  auto quota = ParseConfig(
      "[[memory]]\nname = \"a\"\npool = \"1MiB\"\nclient_quota = \"2MiB\"\n[[channel]]\nname = "
      "\"c\"\n",
      "q.toml");
  CHECK_THAT(std::string(quota.status().message()), Catch::Contains("client_quota"));
}

TEST_CASE("the embedded default serves: a client pool in sys0, sockets under /run/isometry") {
  auto c = ParseConfig(EmbeddedDefaultConfig(), "default");
  REQUIRE(c.ok());
  CHECK(c->daemon.local_socket == "/run/isometry/isometry.sock");
  CHECK(c->daemon.grpc_socket == "/run/isometry/grpc.sock");
  CHECK(c->daemon.grpc_tcp.empty());
  CHECK_FALSE(c->daemon.cpu_latency_us);  // the node's idle states are the operator's
  CHECK(c->runtime.memories[0].pool_bytes == 1ull << 30);
  CHECK(c->runtime.memories[1].pool_bytes == 0);  // REG: no NIC here, no client pool
  CHECK(c->runtime.inline_bytes == 64u << 10);
}

namespace {
constexpr std::string_view kNodeBase = R"(
[daemon]
grpc_tcp = "127.0.0.1:7470"
[[memory]]
name = "sys0"
[[channel]]
name = "memcpy0"
)";

std::string ClusterErrorOf(std::string_view extra) {
  auto r = ParseConfig(StrCat(kNodeBase, extra), "c.toml");
  return r.ok() ? "" : std::string(r.status().message());
}
}  // namespace

TEST_CASE("a cluster section and peers parse with their defaults") {
  auto c = ParseConfig(StrCat(kNodeBase, R"(
[cluster]
node_name = "node-a"
secret_file = "/etc/isometry/cluster.secret"
data_listen = "0.0.0.0:7471"
checksum = true
request_size = "8MiB"
eager_put_size = "64KiB"
[[peer]]
name = "node-b"
address = "10.0.0.2:7470"
)"),
                       "c.toml");
  REQUIRE(c.ok());
  CHECK(c->cluster.node_name == "node-a");
  CHECK(c->cluster.checksum);
  CHECK(c->cluster.request_bytes == 8ull << 20);
  CHECK(c->cluster.eager_put_bytes == 64u << 10);
  CHECK(c->cluster.data_connections == 4);
  CHECK(c->cluster.peer_timeout_ms == 3000);
  CHECK(c->cluster.unsent_limit_bytes == 128u << 10);
  REQUIRE(c->cluster.peers.size() == 1);
  CHECK(c->cluster.peers[0].address == "10.0.0.2:7470");
  CHECK(c->cluster.peers[0].link_bytes_per_s == 0);  // unset: cluster.link_rate
  auto rated = ParseConfig(StrCat(kNodeBase, R"(
[cluster]
node_name = "node-a"
secret_file = "/etc/isometry/cluster.secret"
[[peer]]
name = "node-b"
address = "10.0.0.2:7470"
link_rate = "10GiB"
)"),
                           "r.toml");
  REQUIRE(rated.ok());
  CHECK(rated->cluster.peers[0].link_bytes_per_s == 10ull << 30);
  // The embedded default is a single node.
  CHECK(ParseConfig(EmbeddedDefaultConfig(), "default")->cluster.peers.empty());
}

TEST_CASE("cluster configs that cannot work are refused with the reason") {
  CHECK_THAT(ClusterErrorOf("[[peer]]\nname = \"b\"\naddress = \"h:1\"\n"),
             Catch::Contains("cluster.secret_file is required"));
  CHECK_THAT(ClusterErrorOf("[cluster]\nsecret_file = \"s\"\n[[peer]]\nname = \"b\"\n"),
             Catch::Contains("key 'peer.address': is required"));
  CHECK_THAT(ClusterErrorOf("[cluster]\nsecret_file = \"s\"\nnode_name = \"b\"\n"
                            "[[peer]]\nname = \"b\"\naddress = \"h:1\"\n"),
             Catch::Contains("listed twice or is this node"));
  CHECK_THAT(ClusterErrorOf("[cluster]\nnode_name = \"a:b\"\n"), Catch::Contains("without ':'"));
  CHECK_THAT(ClusterErrorOf("[cluster]\nkeepalive_ms = 5000\npeer_timeout_ms = 1000\n"),
             Catch::Contains("keepalive_ms"));
  CHECK_THAT(ClusterErrorOf("[cluster]\ndata_connections = 0\n"),
             Catch::Contains("cluster.data_connections"));
  CHECK_THAT(ClusterErrorOf("[cluster]\nsecrets = 1\n"), Catch::Contains("unknown key"));
  CHECK_THAT(ClusterErrorOf("[cluster]\nsecret_file = \"s\"\n[[peer]]\nname = \"b\"\n"
                            "address = \"h:1\"\nlink_rate = \"0\"\n"),
             Catch::Contains("peer.link_rate"));
  CHECK_THAT(ClusterErrorOf("[cluster]\nrequest_size = \"1GiB\"\n"),
             Catch::Contains("between 4 KiB and 256 MiB"));
  CHECK_THAT(ClusterErrorOf("[cluster]\neager_put_size = \"2MiB\"\n"),
             Catch::Contains("at most 1 MiB"));
  CHECK_THAT(ClusterErrorOf("[cluster]\nunsent_limit = \"4KiB\"\n"),
             Catch::Contains("cluster.unsent_limit is 4096 bytes; it must be 0 (no limit) or"));
  CHECK(ClusterErrorOf("[cluster]\nunsent_limit = \"0\"\n").empty());
  auto no_tcp = ParseConfig(R"(
[[memory]]
name = "sys0"
[[channel]]
name = "memcpy0"
[cluster]
secret_file = "s"
[[peer]]
name = "b"
address = "h:1"
)",
                            "c.toml");
  REQUIRE(!no_tcp.ok());
  CHECK_THAT(std::string(no_tcp.status().message()), Catch::Contains("daemon.grpc_tcp is empty"));
}

TEST_CASE("[cluster.tls] takes three PEM paths, together, and replaces the secret") {
  auto c = ParseConfig(StrCat(kNodeBase, R"(
[cluster]
node_name = "a"
[cluster.tls]
ca_file = "/etc/isometry/ca.pem"
cert_file = "/etc/isometry/a.pem"
key_file = "/etc/isometry/a.key"
[[peer]]
name = "b"
address = "h:1"
)"),
                       "c.toml");
  REQUIRE(c.ok());
  CHECK(c->cluster.tls.enabled());
  CHECK(c->cluster.tls.ca_file == "/etc/isometry/ca.pem");
  CHECK(c->cluster.tls.cert_file == "/etc/isometry/a.pem");
  CHECK(c->cluster.tls.key_file == "/etc/isometry/a.key");
  CHECK(c->cluster.secret_file.empty());
  CHECK_THAT(ClusterErrorOf("[cluster.tls]\nca_file = \"ca.pem\"\ncert_file = \"a.pem\"\n"),
             Catch::Contains("cluster.tls.key_file is required with [cluster.tls]"));
  CHECK_THAT(ClusterErrorOf("[cluster.tls]\nca_file = 1\n"),
             Catch::Contains("key 'cluster.tls.ca_file': must be a string"));
  CHECK_THAT(ClusterErrorOf("[cluster.tls]\ncafile = \"x\"\n"),
             Catch::Contains("unknown key (known here: ca_file, cert_file, key_file)"));
  CHECK_THAT(ClusterErrorOf("[cluster.tls]\nkey_file = \"\"\n"),
             Catch::Contains("must not be empty"));
  CHECK_THAT(ClusterErrorOf("[cluster]\ntls = 3\n"), Catch::Contains("must be a table"));
}

TEST_CASE("[cluster.etcd] takes endpoints, a prefix, a lease TTL and a poll interval") {
  auto c = ParseConfig(StrCat(kNodeBase, R"(
[cluster]
node_name = "a"
secret_file = "/etc/isometry/cluster.secret"
[cluster.etcd]
endpoints = ["10.0.0.5:2379", "10.0.0.6:2379"]
prefix = "/prod/isometry/"
lease_ttl_s = 5
poll_ms = 250
)"),
                       "c.toml");
  REQUIRE(c.ok());
  CHECK(c->cluster.etcd.enabled());
  CHECK(c->cluster.clustered());
  CHECK(c->cluster.peers.empty());
  CHECK(c->cluster.etcd.endpoints == std::vector<std::string>{"10.0.0.5:2379", "10.0.0.6:2379"});
  CHECK(c->cluster.etcd.prefix == "/prod/isometry/");
  CHECK(c->cluster.etcd.lease_ttl_s == 5);
  CHECK(c->cluster.etcd.poll_ms == 250);
  // One shared network channel for the peers etcd announces.
  const std::vector<ChannelConfig> net = PeerChannels(c->cluster);
  REQUIRE(net.size() == 1);
  CHECK(net[0].peer == kAnyPeer);
  CHECK_THAT(ClusterErrorOf("[cluster.etcd]\nendpoints = []\n"),
             Catch::Contains("key 'cluster.etcd.endpoints': must be a non-empty list"));
  CHECK_THAT(ClusterErrorOf("[cluster.etcd]\nendpoints = [\"http://h:2379\"]\n"),
             Catch::Contains("no scheme"));
  CHECK_THAT(ClusterErrorOf("[cluster.etcd]\nendpoints = [\"h:2379\"]\nprefix = \"/x\"\n"),
             Catch::Contains("end in '/'"));
  CHECK_THAT(ClusterErrorOf("[cluster.etcd]\nendpoints = [\"h:2379\"]\nlease_ttl_s = 1\n"),
             Catch::Contains("from 2 to 3600"));
  CHECK_THAT(ClusterErrorOf("[cluster.etcd]\nendpoint = \"h:1\"\n"),
             Catch::Contains("unknown key"));
  // etcd grants no trust: a secret or TLS is still required.
  CHECK_THAT(
      ClusterErrorOf("[cluster]\nnode_name = \"a\"\n[cluster.etcd]\nendpoints = [\"h:2379\"]\n"),
      Catch::Contains("cluster.secret_file is required"));
}

TEST_CASE("DSK memories take max_file_bytes, quota_bytes and allow_hard_links, and only they do") {
  const std::string channels =
      "[[channel]]\nname = \"r\"\nkind = \"disk_read\"\n[[channel]]\nname = \"w\"\nkind = "
      "\"disk_write\"\n"
      "[[channel]]\nname = \"m\"\n";
  const std::string host = "[[memory]]\nname = \"sys0\"\n";
  auto parse = [&](const std::string& dsk_keys) {
    return ParseConfig(host +
                           "[[memory]]\nname = \"dsk0\"\nkind = \"DSK\"\ndirectory = \"/srv/d\"\n" +
                           dsk_keys + channels,
                       "k.toml");
  };
  auto defaults = parse("");
  REQUIRE(defaults.ok());
  const MemoryConfig& d = defaults->runtime.memories[1];
  CHECK(d.max_file_bytes == 64ull << 30);
  CHECK(d.quota_bytes == 256ull << 30);
  CHECK_FALSE(d.allow_hard_links);
  auto set = parse("max_file_bytes = \"1TiB\"\nquota_bytes = \"2GiB\"\nallow_hard_links = true\n");
  REQUIRE(set.ok());
  CHECK(set->runtime.memories[1].max_file_bytes == 1ull << 40);
  CHECK(set->runtime.memories[1].quota_bytes == 2ull << 30);
  CHECK(set->runtime.memories[1].allow_hard_links);
  auto error = [](const Result<Config>& r) {
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  CHECK_THAT(error(parse("max_file_bytes = 0\n")),
             Catch::Contains("k.toml:7: key 'memory.max_file_bytes'"));
  CHECK_THAT(error(parse("quota_bytes = 0\n")), Catch::Contains("key 'memory.quota_bytes'"));
  CHECK_THAT(error(parse("allow_hard_links = \"yes\"\n")),
             Catch::Contains("key 'memory.allow_hard_links'"));
  CHECK_THAT(error(parse("max_file_bytes = \"9000000TiB\"\n")), Catch::Contains("max_file_bytes"));
  auto on_host =
      ParseConfig("[[memory]]\nname = \"sys0\"\nquota_bytes = \"1GiB\"\n" + channels, "h.toml");
  CHECK_THAT(error(on_host),
             Catch::Contains("h.toml:3: key 'memory.quota_bytes': applies to DSK memories only"));
}

// Issue #11: the cross-field checks point at their line too.
TEST_CASE("cross-field rejections name the file, the line and the key") {
  CHECK_THAT(
      ErrorOf("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n"
              "edges = [\n  [\"a\", \"a\"],\n  [\"a\", \"b\"],\n]\n"),
      Catch::Contains("test.toml:7: key 'channel.edges': channel 'c' names unknown memory 'b'"));
  CHECK_THAT(
      ErrorOf("[[memory]]\nname = \"a\"\n[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n"),
      Catch::Contains("test.toml:4: key 'memory.name': memory 'a' is defined twice"));
  // FBM needs its GPU's number (no line holds the missing key: the table's).
  CHECK_THAT(ErrorOf("[[memory]]\nname = \"a\"\nkind = \"FBM\"\n[[channel]]\nname = \"c\"\n"),
             Catch::Contains("test.toml:1: key 'memory.device': FBM memory 'a' needs a device"));
  CHECK_THAT(ErrorOf("[[memory]]\nname = \"a\"\nkind = \"SYS\"\ndevice = 0\n[[channel]]\nname = "
                     "\"c\"\n"),
             Catch::Contains("test.toml:4: key 'memory.device': applies to FBM memories only"));
  CHECK_THAT(ErrorOf("[[memory]]\nname = \"a\"\nkind = \"FBM\"\ndevice = 0\npool = \"1MiB\"\n"
                     "[[channel]]\nname = \"c\"\n"),
             Catch::Contains("test.toml:5: key 'memory.pool': FBM memory 'a' cannot have a client "
                             "pool"));
  CHECK_THAT(ErrorOf("[runtime]\nspace_threshold = 100\n[[memory]]\nname = "
                     "\"a\"\n[[channel]]\nname = \"c\"\n"),
             Catch::Contains("test.toml:2: key 'runtime.space_threshold'"));
  CHECK_THAT(ErrorOf("[[memory]]\nname = \"a\"\npool = \"1MiB\"\n\nclient_quota = "
                     "\"2MiB\"\n[[channel]]\nname = \"c\"\n"),
             Catch::Contains("test.toml:5: key 'memory.client_quota'"));
  // Nothing written at all: the first line, and the key that is missing.
  CHECK_THAT(ErrorOf(""), Catch::Contains("test.toml:1: key 'memory': no [[memory]] is defined"));
  auto daemon_error = [](const char* body) {
    auto r = ParseConfig(
        std::string(body) + "\n[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n", "d.toml");
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  CHECK_THAT(daemon_error("\n[daemon]\ncq_entries = 8\nsq_entries = 100"),
             Catch::Contains("d.toml:4: key 'daemon.sq_entries': is 100"));
  CHECK_THAT(daemon_error("[daemon]\n\nlog_level = \"loud\""),
             Catch::Contains("d.toml:3: key 'daemon.log_level'"));
  // An absent key points at its table: peers need daemon.grpc_tcp.
  CHECK_THAT(daemon_error("[cluster]\nsecret_file = \"s\"\n[daemon]\nlog_level = \"info\"\n"
                          "[[peer]]\nname = \"b\"\naddress = \"h:1\""),
             Catch::Contains("d.toml:3: key 'daemon.grpc_tcp': peers are listed"));
}

TEST_CASE("a config key error without a file stands alone; Locate adds the file") {
  RuntimeConfig c = DefaultRuntimeConfig();
  c.memories[1].name = c.memories[0].name;
  const Status s = c.Validate();
  CHECK(std::string(s.message()) == "config: key 'memory.name': memory 'sys0' is defined twice");
  CHECK(ConfigKeyOf(s) == std::optional<std::string>("memory[1].name"));
  ConfigOrigin origin;
  origin.source = "x.toml";
  origin.lines["memory[1]"] = 12;
  CHECK(std::string(origin.Locate(s).message()) ==
        "x.toml:12: key 'memory.name': memory 'sys0' is defined twice");
  CHECK(std::string(origin.Locate(Internal("disk on fire")).message()) == "x.toml: disk on fire");
  CHECK(origin.Locate(OkStatus()).ok());
}

TEST_CASE("daemon.max_pending_hellos_per_uid and max_connection_threads: defaults and bounds") {
  const std::string base = "[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n";
  auto parse = [&](const std::string& daemon) {
    return ParseConfig("[daemon]\n" + daemon + base, "d.toml");
  };
  auto defaults = parse("");
  REQUIRE(defaults.ok());
  CHECK(defaults->daemon.max_pending_hellos_per_uid == 64);
  CHECK(defaults->daemon.max_connection_threads == 1024);
  auto set = parse("max_pending_hellos_per_uid = 4\nmax_connection_threads = 12\n");
  REQUIRE(set.ok());
  CHECK(set->daemon.max_pending_hellos_per_uid == 4);
  CHECK(set->daemon.max_connection_threads == 12);
  for (const char* bad : {"max_pending_hellos_per_uid = 0\n", "max_connection_threads = 0\n"}) {
    INFO(bad);
    auto r = parse(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("d.toml:2: key 'daemon."));
  }
}

TEST_CASE("daemon.translate_threads and the other translation bounds: defaults and bounds") {
  const std::string base = "[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n";
  auto parse = [&](const std::string& daemon) {
    return ParseConfig("[daemon]\n" + daemon + base, "d.toml");
  };
  auto defaults = parse("");
  REQUIRE(defaults.ok());
  const DaemonConfig& d = defaults->daemon;
  CHECK((d.translate_threads == 2 && d.translate_queue == 32));
  CHECK((d.max_translates_per_session == 2 && d.max_translate_weight == 1 << 20));
  auto set = parse("translate_threads = 1\nmax_translate_weight = 4096\n");
  REQUIRE(set.ok());
  CHECK((set->daemon.translate_threads == 1 && set->daemon.max_translate_weight == 4096));
  for (const char* bad : {"translate_threads = 0\n", "translate_queue = 0\n",
                          "max_translates_per_session = 0\n", "max_translate_weight = 1048577\n"}) {
    INFO(bad);
    auto r = parse(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("d.toml:2: key 'daemon."));
  }
}

TEST_CASE("[metrics]: off without the table, the default address with it, bad listen named") {
  const std::string base = "[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n";
  auto parse = [&](const std::string& extra) { return ParseConfig(base + extra, "m.toml"); };
  auto error = [&](const std::string& extra) {
    auto r = parse(extra);
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  CHECK_FALSE(parse("")->metrics.enabled);
  CHECK_FALSE(ParseConfig(EmbeddedDefaultConfig(), "default")->metrics.enabled);
  auto on = parse("[metrics]\n");
  REQUIRE(on.ok());
  CHECK(on->metrics.enabled);
  CHECK(on->metrics.listen == "127.0.0.1:9464");
  CHECK(parse("[metrics]\nlisten = \"[::1]:9100\"\n")->metrics.listen == "[::1]:9100");
  for (const char* bad : {"\"127.0.0.1\"", "\"127.0.0.1:0\"", "\"127.0.0.1:65536\"", "\":9464\"",
                          "\"127.0.0.1:94x4\"", "\"127.0.0.1:-1\""}) {
    INFO(bad);
    CHECK_THAT(
        error(StrCat("[metrics]\nlisten = ", bad, "\n")),
        Catch::Contains("m.toml:6: key 'metrics.listen'") && Catch::Contains("is not host:port"));
  }
  CHECK_THAT(error("[metrics]\nlisten = 9464\n"),
             Catch::Contains("key 'metrics.listen': must be a string"));
  CHECK_THAT(error("[metrics]\nport = 9464\n"),
             Catch::Contains("key 'metrics.port': unknown key (known here: listen, "
                             "max_connections, request_timeout_ms)"));
  CHECK(on->metrics.max_connections == 64);
  CHECK(on->metrics.request_timeout_ms == 2000);
  auto bounded = parse("[metrics]\nmax_connections = 8\nrequest_timeout_ms = 500\n");
  REQUIRE(bounded.ok());
  CHECK(bounded->metrics.max_connections == 8);
  CHECK(bounded->metrics.request_timeout_ms == 500);
  CHECK_THAT(error("[metrics]\nrequest_timeout_ms = 0\n"),
             Catch::Contains("key 'metrics.request_timeout_ms'"));
  CHECK_THAT(error("[metrics]\nmax_connections = 0\n"),
             Catch::Contains("key 'metrics.max_connections'"));
  auto hp = ParseHostPort("[::1]:9100");
  REQUIRE(hp.ok());
  CHECK(hp->host == "::1");
  CHECK(hp->port == 9100);
}

}  // namespace ISOMETRY_TEST_FILE
