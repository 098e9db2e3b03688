// The Prometheus exposition of a snapshot (daemon/server/metrics_text.h):
// the format's grammar, the escaping of label values, and the families a
// dashboard relies on.
#include "daemon/server/metrics_text.h"

#include <catch2/catch.hpp>
#include <charconv>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "daemon/server/metrics_process.h"

namespace isometry {
namespace ISOMETRY_TEST_FILE {
namespace {

MetricsSnapshot Sample() {
  MetricsSnapshot s;
  s.version = "9.9.9";
  s.process = ProcessMetrics{1.7e9, 12.5, 4096, 8192, 9, 1024};
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
  c.queued_by_priority = {{5, 1}, {0, 3}, {-1, 0}};
  static Histogram wait(kSecondsBounds);
  static const bool observed = [] {
    wait.Observe(2e-5);
    wait.Observe(0.3);
    wait.Observe(1e6);  // past every bound: +Inf only
    return true;
  }();
  (void)observed;
  c.queue_wait = {{5, wait.Counts()}, {kOtherPriorities, Histogram(kSecondsBounds).Counts()}};
  s.channels.push_back(c);
  s.ended.duration = {{"<64KiB", wait.Counts()}, {">=64MiB", Histogram(kSecondsBounds).Counts()}};
  s.ended.failed_by_code = {{"NOT_FOUND", 2}, {"UNAVAILABLE", 0}};
  s.ended.bytes_by_uid = {{-1, 10}, {1000, 1 << 20}, {-2, 5}};
  s.memories.push_back({"sys0", "SYS", 64 << 20, 4096, 256 << 20, 0, 8192});
  s.memories.push_back({"reg0", "REG", 0, 0, 256 << 20, 0, 0});
  MemoryMetrics dsk{"dsk0", "DSK"};
  dsk.disk_size_avail.emplace(1000, 250);
  dsk.disk_quota = 4096;
  s.memories.push_back(dsk);
  return s;
}

// Checks the page against the text format's grammar and returns its
// samples by "name{labels}".
std::map<std::string, std::string> Parse(const std::string& page) {
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\\\|\\"|\\n)*",?)*\})? (\S+)$)");
  static const std::regex type(
      R"(^# TYPE ((?:isometry|process)_[a-z0-9_]+) (counter|gauge|histogram)$)");
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
      // TYPE before the samples; a histogram's have its suffixes.
      std::string family = m[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (types.count(family) == 0 && family.ends_with(suffix)) {
          family.resize(family.size() - std::string_view(suffix).size());
        }
      }
      CHECK(types.count(family) == 1);
      CHECK(out.emplace(std::string(m[1]) + std::string(m[2]), m[5]).second);
    }
  }
  return out;
}

TEST_CASE("the page follows the text format, with HELP and TYPE before every family") {
  const auto samples = Parse(RenderMetrics(Sample()));
  CHECK(samples.at("isometry_build_info{version=\"9.9.9\"}") == "1");
  CHECK(samples.at("process_cpu_seconds_total") == "12.5");
  CHECK(samples.at("process_start_time_seconds") == "1.7e+09");
  CHECK(samples.at("process_resident_memory_bytes") == "4096");
  CHECK(samples.at("process_open_fds") == "9");
  CHECK(samples.at("process_max_fds") == "1024");
  CHECK(samples.count("isometry_uptime_seconds") == 0);  // replaced by process_start_time_seconds
  CHECK(samples.at("isometry_transfers{state=\"running\"}") == "2");
  CHECK(samples.at("isometry_transfers_finished_total{state=\"done\"}") == "7");
  CHECK(samples.at("isometry_channel_bytes_total{channel=\"memcpy0\",kind=\"memcpy\"}") ==
        "1048576");
  CHECK(samples.at("isometry_channel_errors_total{channel=\"memcpy0\",kind=\"memcpy\"}") == "1");
  CHECK(samples.at(
            "isometry_channel_queued_xds{channel=\"memcpy0\",kind=\"memcpy\",priority=\"5\"}") ==
        "1");
  CHECK(samples.at(
            "isometry_channel_queued_xds{channel=\"memcpy0\",kind=\"memcpy\",priority=\"0\"}") ==
        "3");
  // A priority seen before stays at 0 when none of its XDs is queued.
  CHECK(samples.at(
            "isometry_channel_queued_xds{channel=\"memcpy0\",kind=\"memcpy\",priority=\"-1\"}") ==
        "0");
  CHECK(samples.at("isometry_transfers_failed_total{code=\"NOT_FOUND\"}") == "2");
  CHECK(samples.at("isometry_transfers_failed_total{code=\"UNAVAILABLE\"}") == "0");
  CHECK(samples.at("isometry_client_bytes_total{uid=\"1000\"}") == "1048576");
  CHECK(samples.at("isometry_client_bytes_total{uid=\"-1\"}") == "10");
  CHECK(samples.at("isometry_client_bytes_total{uid=\"other\"}") == "5");
  CHECK(samples.at("isometry_pool_used_bytes{memory=\"sys0\",kind=\"SYS\"}") == "4096");
  CHECK(samples.at("isometry_staging_budget_bytes{memory=\"reg0\",kind=\"REG\"}") == "268435456");
  CHECK(samples.count("isometry_pool_used_bytes{memory=\"reg0\",kind=\"REG\"}") == 0);  // no pool
  CHECK(samples.at(R"(isometry_disk_size_bytes{memory="dsk0"})") == "1000");
  CHECK(samples.at(R"(isometry_disk_avail_bytes{memory="dsk0"})") == "250");
  CHECK(samples.at(R"(isometry_disk_quota_bytes{memory="dsk0"})") == "4096");
  CHECK(samples.count(R"(isometry_disk_quota_bytes{memory="sys0"})") == 0);
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
  s.peers.push_back({"b", "down", 0, 1, 2, 3, 4, 5, 6});
  s.peers.push_back({"c", "strange", 0.002, 0, 0});
  const auto samples = Parse(RenderMetrics(s));
  CHECK(samples.at(R"(isometry_peer_state{peer="b",state="down"})") == "1");
  CHECK(samples.at(R"(isometry_peer_state{peer="b",state="up"})") == "0");
  CHECK(samples.at(R"(isometry_peer_up{peer="b"})") == "0");
  CHECK(samples.at(R"(isometry_peer_state{peer="c",state="strange"})") == "1");
  CHECK(samples.at(R"(isometry_peer_sent_bytes_total{peer="b"})") == "1");
  CHECK(samples.at(R"(isometry_peer_received_bytes_total{peer="b"})") == "2");
  CHECK(samples.at(R"(isometry_peer_resumes_total{peer="b"})") == "3");
  CHECK(samples.at(R"(isometry_peer_express_sent_bytes_total{peer="b"})") == "4");
  CHECK(samples.at(R"(isometry_peer_readers_lifted_total{peer="b"})") == "5");
  CHECK(samples.at(R"(isometry_peer_eager_puts_declined_total{peer="b"})") == "6");
}

TEST_CASE("values that are not finite are written as the format spells them") {
  MetricsSnapshot s = Sample();
  s.process->cpu_s = std::numeric_limits<double>::quiet_NaN();
  s.has_peers = true;
  s.peers.push_back({"b", "up", std::numeric_limits<double>::infinity(), 0, 0, 0});
  const auto samples = Parse(RenderMetrics(s));
  CHECK(samples.at("process_cpu_seconds_total") == "NaN");
  CHECK(samples.at(R"(isometry_peer_rtt_seconds{peer="b"})") == "+Inf");
}

TEST_CASE("histograms: cumulative buckets, +Inf equal to _count, _sum") {
  const auto samples = Parse(RenderMetrics(Sample()));
  const std::string labels = R"(channel="memcpy0",kind="memcpy",priority="5")";
  const std::string name = "isometry_channel_queue_wait_seconds";
  uint64_t last = 0;
  size_t buckets = 0;
  for (double bound : kSecondsBounds) {
    char le[32];
    *std::to_chars(le, le + sizeof(le) - 1, bound).ptr = '\0';
    std::string key = name;
    key.append("_bucket{").append(labels).append(",le=\"").append(le).append("\"}");
    const uint64_t n = std::stoull(samples.at(key));
    CHECK(n >= last);
    last = n;
    ++buckets;
  }
  CHECK(buckets == std::size(kSecondsBounds));
  CHECK(samples.at(name + "_bucket{" + labels + R"(,le="1e-05"})") == "0");
  CHECK(samples.at(name + "_bucket{" + labels + R"(,le="5e-05"})") == "1");
  CHECK(samples.at(name + "_bucket{" + labels + R"(,le="0.5"})") == "2");
  CHECK(samples.at(name + "_bucket{" + labels + R"(,le="+Inf"})") == "3");
  CHECK(samples.at(name + "_count{" + labels + "}") == "3");
  CHECK(std::stod(samples.at(name + "_sum{" + labels + "}")) == Approx(1e6 + 0.30002));
  // A priority past the bound is "other"; an empty histogram has every series at 0.
  CHECK(samples.at(name + R"(_count{channel="memcpy0",kind="memcpy",priority="other"})") == "0");
  CHECK(samples.at(R"(isometry_transfer_duration_seconds_bucket{size_class="<64KiB",le="+Inf"})") ==
        "3");
  CHECK(samples.at(R"(isometry_transfer_duration_seconds_count{size_class=">=64MiB"})") == "0");
}

TEST_CASE("process_* numbers parsed from /proc/self/stat") {
  // A command name with a space and parentheses: fields count from the last ')'.
  const std::string stat =
      "4242 (iso (d) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 9 0 "
      "12345 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
  const auto m = ParseProcStat(stat, 1.7e9, 100, 4096);
  REQUIRE(m);
  CHECK(m->cpu_s == Approx(4.0));
  CHECK(m->start_time_s == Approx(1.7e9 + 123.45));
  CHECK(m->virtual_bytes == 104857600);
  CHECK(m->resident_bytes == 2560ull * 4096);
  CHECK_FALSE(ParseProcStat("4242 (x) S 1 2", 0, 100, 4096));
  CHECK_FALSE(ParseProcStat("no parenthesis", 0, 100, 4096));
  // This process's own: started in the past, some CPU, open fds under the limit.
  const auto self = ReadProcessMetrics();
  REQUIRE(self);
  CHECK(self->start_time_s > 1.5e9);
  CHECK(self->resident_bytes > 0);
  CHECK(self->open_fds >= 3);
  CHECK(self->open_fds <= self->max_fds);
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry
