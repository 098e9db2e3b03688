// The Prometheus exposition of a snapshot (daemon/server/metrics_text.h):
// the format's grammar, the escaping of label values, and the families a
// dashboard relies on.
#include "daemon/server/metrics_text.h"

#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace isometry {
namespace ISOMETRY_TEST_FILE {
namespace {

MetricsSnapshot Sample() {
  MetricsSnapshot s;
  s.version = "9.9.9";
  s.uptime_s = 12.5;
  s.transfers_running = 2;
  s.transfers_done = 7;
  s.plan_cache_hits = 3;
  s.own_hop_windows = 2;
  s.own_hop_timeouts = 4;
  ChannelMetrics c;
  c.name = "memcpy0";
  c.kind = "memcpy";
  c.bytes = 1 << 20;
  c.requests = 4;
  c.errors = 1;
  c.in_flight = 1;
  c.max_in_flight = 2;
  c.queued_by_priority = {{5, 1}, {0, 3}};
  c.bytes_per_s = 1.5e9;
  s.channels.push_back(c);
  s.memories.push_back({"sys0", "SYS", 64 << 20, 4096, 256 << 20, 0, 8192});
  s.memories.push_back({"reg0", "REG", 0, 0, 256 << 20, 0, 0});
  return s;
}

// Checks the page against the text format's grammar and returns its
// samples by "name{labels}".
std::map<std::string, std::string> Parse(const std::string& page) {
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\\\|\\"|\\n)*",?)*\})? (\S+)$)");
  static const std::regex type(R"(^# TYPE (isometry_[a-z0-9_]+) (counter|gauge)$)");
  std::map<std::string, std::string> out;
  std::map<std::string, std::string> types;
  std::set<std::string> helped;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    INFO(line);
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      CHECK(helped.insert(name).second);
    } else if (std::regex_match(line, m, type)) {
      CHECK(helped.count(m[1]) == 1);  // HELP, then TYPE
      CHECK(types.emplace(m[1], m[2]).second);
      if (m[2] == "counter") CHECK(std::string(m[1]).ends_with("_total"));
    } else {
      REQUIRE(std::regex_match(line, m, sample));
      CHECK(types.count(m[1]) == 1);  // TYPE before the samples
      CHECK(out.emplace(std::string(m[1]) + std::string(m[2]), m[5]).second);
    }
  }
  return out;
}

TEST_CASE("the page follows the text format, with HELP and TYPE before every family") {
  const auto samples = Parse(RenderMetrics(Sample()));
  CHECK(samples.at("isometry_build_info{version=\"9.9.9\"}") == "1");
  CHECK(samples.at("isometry_uptime_seconds") == "12.5");
  CHECK(samples.at("isometry_transfers{state=\"running\"}") == "2");
  CHECK(samples.at("isometry_transfers_finished_total{state=\"done\"}") == "7");
  CHECK(samples.at("isometry_channel_bytes_total{channel=\"memcpy0\",kind=\"memcpy\"}") ==
        "1048576");
  CHECK(samples.at("isometry_channel_errors_total{channel=\"memcpy0\",kind=\"memcpy\"}") == "1");
  CHECK(samples.at("isometry_channel_throughput_bytes_per_second{channel=\"memcpy0\",kind="
                   "\"memcpy\"}") == "1.5e+09");
  CHECK(samples.at(
            "isometry_channel_queued_xds{channel=\"memcpy0\",kind=\"memcpy\",priority=\"5\"}") ==
        "1");
  CHECK(samples.at(
            "isometry_channel_queued_xds{channel=\"memcpy0\",kind=\"memcpy\",priority=\"0\"}") ==
        "3");
  CHECK(samples.at("isometry_pool_used_bytes{memory=\"sys0\",kind=\"SYS\"}") == "4096");
  CHECK(samples.at("isometry_staging_budget_bytes{memory=\"reg0\",kind=\"REG\"}") == "268435456");
  CHECK(samples.count("isometry_pool_used_bytes{memory=\"reg0\",kind=\"REG\"}") == 0);  // no pool
  CHECK(samples.at("isometry_plan_cache_hits_total") == "3");
  CHECK(samples.at("isometry_own_hop_windows") == "2");
  CHECK(samples.at("isometry_own_hops_total{result=\"timed_out\"}") == "4");
  CHECK(samples.at("isometry_own_hops_total{result=\"ran\"}") == "0");
  CHECK(samples.at("isometry_plans_total{algorithm=\"full\"}") == "0");
  // Without [[peer]], no peer families at all.
  for (const auto& [k, v] : samples) CHECK(k.rfind("isometry_peer", 0) != 0);
}

TEST_CASE("label values escape backslash, double quote and line feed") {
  CHECK(EscapeLabelValue("plain") == "plain");
  CHECK(EscapeLabelValue(R"(a\b)") == R"(a\\b)");
  CHECK(EscapeLabelValue(R"(say "hi")") == R"(say \"hi\")");
  CHECK(EscapeLabelValue("two\nlines") == R"(two\nlines)");
  MetricsSnapshot s = Sample();
  s.channels[0].name = "odd\"name\\\n}";
  s.has_peers = true;
  s.peers.push_back({"b\"} 1\nisometry_fake 2", "up", 0.00125, 10, 20});
  const std::string page = RenderMetrics(s);
  // The injected text stays inside its label: no line of its own.
  CHECK(page.find("\nisometry_fake") == std::string::npos);
  const auto samples = Parse(page);
  CHECK(samples.at(R"(isometry_channel_requests_total{channel="odd\"name\\\n}",kind="memcpy"})") ==
        "4");
  CHECK(samples.at(R"(isometry_peer_rtt_seconds{peer="b\"} 1\nisometry_fake 2"})") == "0.00125");
}

TEST_CASE("peers: one state series per known state, 1 for the current one") {
  MetricsSnapshot s = Sample();
  s.has_peers = true;
  s.peers.push_back({"b", "down", 0, 1, 2});
  s.peers.push_back({"c", "strange", 0.002, 0, 0});
  const auto samples = Parse(RenderMetrics(s));
  CHECK(samples.at(R"(isometry_peer_state{peer="b",state="down"})") == "1");
  CHECK(samples.at(R"(isometry_peer_state{peer="b",state="up"})") == "0");
  CHECK(samples.at(R"(isometry_peer_up{peer="b"})") == "0");
  CHECK(samples.at(R"(isometry_peer_state{peer="c",state="strange"})") == "1");
  CHECK(samples.at(R"(isometry_peer_sent_bytes_total{peer="b"})") == "1");
  CHECK(samples.at(R"(isometry_peer_received_bytes_total{peer="b"})") == "2");
}

TEST_CASE("values that are not finite are written as the format spells them") {
  MetricsSnapshot s = Sample();
  s.channels[0].bytes_per_s = std::numeric_limits<double>::infinity();
  s.uptime_s = std::numeric_limits<double>::quiet_NaN();
  const auto samples = Parse(RenderMetrics(s));
  CHECK(samples.at("isometry_uptime_seconds") == "NaN");
  CHECK(samples.at("isometry_channel_throughput_bytes_per_second{channel=\"memcpy0\",kind="
                   "\"memcpy\"}") == "+Inf");
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry
