// A config's channel edges as the kinds' descriptors judge them
// (channels/channel_edges.h): the default edges each kind serves, PROCESS
// memory for the kind that reaches it, and the refusals, which name the
// file, the line and the key like the config's own.
#include "channels/channel_edges.h"

#include <catch2/catch.hpp>

#include "channels/channel_backend.h"
#include "channels/channel_factory.h"
#include "config/config_parser.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

using Edges = std::vector<std::pair<std::string, std::string>>;

// The located refusal of `toml`'s edges; "" when they pass. The file
// itself must pass the config's own checks.
std::string EdgeError(std::string_view toml) {
  Result<Config> c = ParseConfig(toml, "e.toml");
  REQUIRE(c.ok());
  const Status s = c->origin.Locate(CheckChannelKinds(c->runtime));
  return s.ok() ? "" : s.ToString();
}

}  // namespace

TEST_CASE("a channel without edges serves what its kind's descriptor serves") {
  RuntimeConfig rc = DefaultRuntimeConfig();  // sys0, reg0, zcm0; memcpy0, cma0
  REQUIRE(CheckChannelKinds(rc).ok());
  const Edges memcpy = ChannelEdges(rc, rc.channels[0]);
  CHECK(memcpy.size() == 9);  // every pair of the three host memories
  CHECK(memcpy.front() == Edges::value_type{"sys0", "sys0"});
  // cma reaches clients' PROCESS memory alone, once the runtime added it.
  CHECK(ChannelEdges(rc, rc.channels[1]).empty());
  MemoryConfig proc;
  proc.name = "proc";
  proc.kind = MemoryKind::kProcess;
  rc.memories.push_back(proc);
  const Edges cma = ChannelEdges(rc, rc.channels[1]);
  CHECK(cma == Edges{{"proc", "sys0"},
                     {"sys0", "proc"},
                     {"proc", "reg0"},
                     {"reg0", "proc"},
                     {"proc", "zcm0"},
                     {"zcm0", "proc"}});
  // ... and no other kind ever does.
  CHECK(ChannelEdges(rc, rc.channels[0]) == memcpy);
  // A DSK memory joins the disk kinds' edges, never memcpy's.
  MemoryConfig dsk;
  dsk.name = "dsk0";
  dsk.kind = MemoryKind::kDsk;
  rc.memories.push_back(dsk);
  ChannelConfig read;
  read.name = "disk_read0";
  read.kind = ChannelKind::kDiskRead;
  CHECK(ChannelEdges(rc, read) == Edges{{"dsk0", "sys0"}, {"dsk0", "reg0"}, {"dsk0", "zcm0"}});
  CHECK(ChannelEdges(rc, rc.channels[0]) == memcpy);
  // Written edges are the channel's, whatever its kind's default.
  ChannelConfig one = rc.channels[0];
  one.edges = {{"reg0", "sys0"}};
  CHECK(ChannelEdges(rc, one) == one.edges);
}

TEST_CASE("edges a kind cannot serve, or that two channels serve, are refused by their line") {
  constexpr char kTwo[] = R"([[memory]]
name = "a"
[[memory]]
name = "d"
kind = "DSK"
directory = "/tmp"
staging = 0
[[channel]]
name = "m"
[[channel]]
name = "r"
kind = "disk_read"
edges = [["d", "a"], ["a", "d"]]
)";
  CHECK_THAT(EdgeError(kTwo),
             Catch::Contains("e.toml:13: key 'channel.edges': channel 'r' (disk_read) cannot "
                             "serve a -> d"));
  // A second memcpy channel without edges would serve the first's: its
  // kind line is named.
  CHECK_THAT(EdgeError("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n"
                       "[[channel]]\nname = \"c2\"\nkind = \"memcpy\"\n"),
             Catch::Contains("e.toml:7: key 'channel.kind': channel 'c2' serves a -> a, which "
                             "another channel already serves"));
  // Written edges that split the pairs between two channels pass.
  CHECK(EdgeError("[[memory]]\nname = \"a\"\n[[memory]]\nname = \"b\"\n[[channel]]\nname = "
                  "\"c\"\nedges = [[\"a\", \"b\"]]\n[[channel]]\nname = \"c2\"\nedges = [[\"b\", "
                  "\"a\"]]\n")
            .empty());
  // Channels the daemon makes per peer join no configured memory.
  RuntimeConfig rc = DefaultRuntimeConfig();
  ChannelConfig net;
  net.name = "tcp:b";
  net.kind = ChannelKind::kRemoteMemcpy;
  net.peer = "b";
  rc.channels.push_back(net);
  CHECK(CheckChannelKinds(rc).ok());
  CHECK(ChannelEdges(rc, net).empty());
}

TEST_CASE("what a kind's descriptor forbids a written channel is refused by its line") {
  // cma reaches clients' memory: no edges, and it cannot be capped.
  CHECK_THAT(EdgeError("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"m\"\n[[channel]]\n"
                       "name = \"c\"\nkind = \"cma\"\nedges = [[\"a\", \"a\"]]\n"),
             Catch::Contains("e.toml:8: key 'channel.edges': channel 'c' (cma) takes no edges"));
  CHECK_THAT(EdgeError("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"m\"\n[[channel]]\n"
                       "name = \"c\"\nkind = \"cma\"\nrate_limit = \"1GiB\"\n"),
             Catch::Contains("e.toml:8: key 'channel.rate_limit': channel 'c' (cma) takes no "
                             "rate_limit"));
  // remote_memcpy channels are the daemon's to make, one per [[peer]].
  CHECK_THAT(EdgeError("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"m\"\n[[channel]]\n"
                       "name = \"n\"\nkind = \"remote_memcpy\"\n"),
             Catch::Contains("e.toml:7: key 'channel.kind': channel 'n' has kind remote_memcpy; "
                             "remote_memcpy channels are made per [[peer]], not written"));
  // The same settings on a kind that allows them pass.
  CHECK(EdgeError("[[memory]]\nname = \"a\"\n[[channel]]\nname = \"m\"\n"
                  "rate_limit = \"1GiB\"\nedges = [[\"a\", \"a\"]]\n")
            .empty());
  // Every descriptor but cma's takes a rate limit.
  for (const ChannelBackend* b : ChannelBackends()) {
    CHECK(b->takes_rate_limit == (b->kind != ChannelKind::kCma));
  }
}

}  // namespace ISOMETRY_TEST_FILE
