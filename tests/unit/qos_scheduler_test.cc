// Traffic classes: the [qos] parser's and validator's errors, which class
// a client falls in, and the scheduler's bookkeeping (start tags, caps,
// pacing) that the runtime's DMA workers use.
#include "daemon/runtime/qos_scheduler.h"

#include <catch2/catch.hpp>

#include "config/config_parser.h"
#include "core/thread_nice.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace std::chrono;

constexpr char kMemories[] = R"(
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
)";

// A local client: uid, primary gid, name.
QosClient Local(uint32_t uid, uint32_t gid, std::string name, std::vector<uint32_t> groups = {}) {
  QosClient c;
  c.uid = uid;
  c.gid = gid;
  c.groups = std::move(groups);
  c.name = std::move(name);
  return c;
}

QosClient Grpc(std::string name) {
  QosClient c;
  c.name = std::move(name);
  return c;
}

Result<Config> Parse(const std::string& qos) {
  return ParseConfig(std::string(kMemories) + qos, "q.toml");
}

TEST_CASE("[qos] classes, rules and caps are read with their defaults") {
  auto c = Parse(R"(
[[qos.class]]
name = "fg"
weight = 3
[[qos.class]]
name = "bg"
max_priority = 5
nice = 19
caps = { disk_write = { rate = "200MiB/s", in_flight = 0 } }
[[qos.rule]]
uid = 1000
class = "bg"
[[qos.rule]]
client = "batch"
class = "bg"
)");
  REQUIRE(c.ok());
  const QosConfig& q = c->qos;
  CHECK(q.default_class == "fg");  // the first class listed
  REQUIRE(q.classes.size() == 2);
  CHECK(q.classes[0].weight == 3);
  CHECK(q.classes[1].weight == 1);
  CHECK(q.classes[1].max_priority == 5);
  CHECK(q.classes[0].nice == 0);
  CHECK(q.classes[1].nice == 19);
  const QosCaps& caps = q.classes[1].caps.at(ChannelKind::kDiskWrite);
  CHECK(caps.rate_bytes_per_s == 200ull << 20);
  CHECK(caps.in_flight == 0);
  CHECK(q.ClassOf(Local(1000, 1000, "x")) == "bg");
  CHECK(q.ClassOf(Local(1001, 1001, "batch")) == "bg");
  CHECK(q.ClassOf(Grpc("batch")) == "bg");  // gRPC, by name
  CHECK(q.ClassOf(Local(1001, 1001, "x")) == "fg");
}

TEST_CASE("a peer's half runs in the class a rule for peers gives, else its own class's name") {
  auto c = Parse(R"(
[[qos.class]]
name = "fg"
[[qos.class]]
name = "bg"
[[qos.class]]
name = "guests"
[[qos.rule]]
peer = "node-c"
class = "guests"
[[qos.rule]]
remote_class = "batch"
class = "bg"
[[qos.rule]]
uid = 7
class = "bg"
)");
  REQUIRE(c.ok());
  const QosConfig& q = c->qos;
  QosClient half;
  half.peer = "node-c";
  half.remote_class = "fg";
  CHECK(q.ClassOf(half) == "guests");  // every half node-c starts here
  half.peer = "node-b";
  CHECK(q.ClassOf(half) == "fg");  // the same name here
  half.remote_class = "batch";
  CHECK(q.ClassOf(half) == "bg");  // mapped
  half.remote_class = "unknown-here";
  CHECK(q.ClassOf(half) == "fg");  // the default class
  // Local rules never match a peer's half, nor peer rules a local client.
  half.uid = 7;
  CHECK(q.ClassOf(half) == "fg");
  CHECK(q.ClassOf(Local(7, 7, "x")) == "bg");
  CHECK(q.ClassOf(Local(8, 8, "x")) == "fg");
}

TEST_CASE("gid rules match supplementary groups; gRPC sessions go to grpc_class") {
  auto c = Parse(R"(
[qos]
default_class = "fg"
grpc_class = "guests"
[[qos.class]]
name = "fg"
[[qos.class]]
name = "guests"
max_priority = 1
[[qos.class]]
name = "students"
max_priority = 1
[[qos.rule]]
gid = 500
class = "students"
)");
  REQUIRE(c.ok());
  const QosConfig& q = c->qos;
  CHECK(q.ClassOf(Local(1000, 1000, "x", {1000, 500})) == "students");  // sg cannot leave it
  CHECK(q.ClassOf(Local(1000, 1000, "x", {1000})) == "fg");
  CHECK(q.ClassOf(Grpc("x")) == "guests");  // no uid to match: not the default class
  // A name rule may not lift gRPC clients out of grpc_class either.
  auto lift = Parse(R"(
[qos]
default_class = "fg"
grpc_class = "guests"
[[qos.class]]
name = "fg"
[[qos.class]]
name = "guests"
max_priority = 1
[[qos.rule]]
client = "me"
class = "fg"
)");
  REQUIRE_FALSE(lift.ok());
  CHECK_THAT(std::string(lift.status().message()), Catch::Contains("or grpc_class"));
}

TEST_CASE("without [qos] everyone is in the one default class") {
  auto c = Parse("");
  REQUIRE(c.ok());
  CHECK(c->qos.ClassOf(Local(0, 0, "x")) == "default");
  REQUIRE(c->qos.Effective().size() == 1);
  CHECK(c->qos.Effective()[0].max_priority == std::numeric_limits<int32_t>::max());
}

TEST_CASE("a class's nice value may be \"idle\": its work runs under SCHED_IDLE") {
  auto c = Parse("[[qos.class]]\nname = \"fg\"\n[[qos.class]]\nname = \"bg\"\nnice = \"idle\"\n");
  REQUIRE(c.ok());
  CHECK(c->qos.classes[0].nice == 0);
  CHECK(c->qos.classes[1].nice == kIdleThreadNice);
  CHECK(ThreadNiceText(kIdleThreadNice) == "idle");
  CHECK(ThreadNiceText(10) == "10");
}

TEST_CASE("bad [qos] tables are refused at their line") {
  struct Case {
    std::string text, message;
  };
  for (const Case& k : std::vector<Case>{
           {"[[qos.class]]\nname = \"a\"\nweight = 0\n", "q.toml:13: key 'qos.class[0].weight'"},
           {"[[qos.class]]\nname = \"a\"\n[[qos.class]]\nname = \"a\"\n", "defined twice"},
           {"[[qos.class]]\nname = \"a\"\n[[qos.rule]]\nuid = 1\nclass = \"b\"\n",
            "class 'b' is not defined"},
           {"[[qos.class]]\nname = \"a\"\n[[qos.rule]]\nclass = \"a\"\n", "a rule needs uid"},
           {"[[qos.class]]\nname = \"a\"\n[[qos.rule]]\npeer = \"b\"\nuid = 1\nclass = \"a\"\n",
            "takes no uid"},
           {"[qos]\ndefault_class = \"z\"\n[[qos.class]]\nname = \"a\"\n", "'z' is not a class"},
           {"[[qos.class]]\nname = \"a\"\ncaps = { tape = { rate = 1 } }\n", "not a channel kind"},
           {"[[qos.class]]\nname = \"a\"\ncaps = { memcpy = { speed = 1 } }\n", "unknown key"},
           {"[[qos.class]]\nname = \"a\"\nnice = 20\n", "q.toml:13: key 'qos.class[0].nice'"},
           {"[[qos.class]]\nname = \"a\"\nnice = -1\n", "key 'qos.class[0].nice'"},
           {"[[qos.class]]\nname = \"a\"\nnice = \"low\"\n",
            "q.toml:13: key 'qos.class[0].nice': must be an integer from 0 to 19 or \"idle\""},
           {"[[qos.class]]\nname = \"a\"\nnice = 1.5\n", "or \"idle\""},
           // A client names itself: a name alone may not lift it above the
           // default class (more weight, a higher ceiling, fewer caps).
           {"[qos]\ndefault_class = \"low\"\n[[qos.class]]\nname = \"low\"\nmax_priority = 1\n"
            "[[qos.class]]\nname = \"high\"\n[[qos.rule]]\nclient = \"me\"\nclass = \"high\"\n",
            "a rule by client name alone may not"},
           // ... nor to a lower nice value (more of a busy CPU).
           {"[qos]\ndefault_class = \"low\"\n[[qos.class]]\nname = \"low\"\nnice = 10\n"
            "[[qos.class]]\nname = \"high\"\nnice = 5\n[[qos.rule]]\nclient = \"me\"\n"
            "class = \"high\"\n",
            "a rule by client name alone may not"},
           // ... and not out of the idle policy either.
           {"[qos]\ndefault_class = \"low\"\n[[qos.class]]\nname = \"low\"\nnice = \"idle\"\n"
            "[[qos.class]]\nname = \"high\"\nnice = 19\n[[qos.rule]]\nclient = \"me\"\n"
            "class = \"high\"\n",
            "a rule by client name alone may not"},
       }) {
    auto c = Parse(k.text);
    INFO(k.text);
    REQUIRE_FALSE(c.ok());
    CHECK_THAT(std::string(c.status().message()), Catch::Contains(k.message));
  }
}

TEST_CASE("start tags share a channel 3:1 while both classes are busy") {
  QosConfig config;
  config.classes = {{"fg", 3, 100, {}}, {"bg", 1, 100, {}}};
  auto table = QosTable::Make(config, {ChannelKind::kMemcpy}, nullptr);
  REQUIRE_FALSE(table->trivial);
  QosWorker w;
  w.Resize(table->classes.size());
  const auto now = QosClock::now();
  uint64_t bytes[2] = {0, 0};
  for (int i = 0; i < 400; ++i) {  // both always have work: the smaller tag goes
    const size_t c = w.StartTag(0) <= w.StartTag(1) ? 0 : 1;
    w.Charge(c, table->classes[c].per_channel[0], 1 << 20, now);
    --w.shares[c].in_flight;
    bytes[c] += 1 << 20;
  }
  CHECK(static_cast<double>(bytes[0]) / static_cast<double>(bytes[1]) == Approx(3.0).epsilon(0.02));
}

TEST_CASE("a class idle for a while gets no credit for it") {
  QosConfig config;
  config.classes = {{"a", 1, 100, {}}, {"b", 1, 100, {}}};
  auto table = QosTable::Make(config, {ChannelKind::kMemcpy}, nullptr);
  QosWorker w;
  w.Resize(2);
  const auto now = QosClock::now();
  for (int i = 0; i < 100; ++i) w.Charge(0, table->classes[0].per_channel[0], 1 << 20, now);
  // b starts at the worker's virtual time, not at 0: it does not get 100
  // requests in a row.
  CHECK(w.StartTag(1) == Approx(w.virtual_time));
  w.Charge(1, table->classes[1].per_channel[0], 1 << 20, now);
  CHECK(w.StartTag(0) < w.StartTag(1) + 1);
}

TEST_CASE("caps hold a class back: in flight, paced rate, and 0 pauses") {
  QosConfig config;
  QosClass c{"c", 1, 100, {}};
  c.caps[ChannelKind::kMemcpy].in_flight = 1;
  c.caps[ChannelKind::kDiskWrite].rate_bytes_per_s = 100 << 20;  // 100 MiB/s
  c.caps[ChannelKind::kDiskRead].rate_bytes_per_s = 0;
  config.classes = {c};
  auto table = QosTable::Make(
      config, {ChannelKind::kMemcpy, ChannelKind::kDiskWrite, ChannelKind::kDiskRead}, nullptr);
  const auto& limits = table->classes[0].per_channel;
  CHECK_FALSE(table->trivial);
  CHECK(limits[2].paused);
  const auto now = QosClock::now();
  auto wake = QosClock::time_point::max();
  QosWorker w;
  w.Resize(1);
  CHECK_FALSE(w.HeldBack(0, limits[0], now, wake));
  w.Charge(0, limits[0], 4096, now);
  CHECK(w.HeldBack(0, limits[0], now, wake));  // one in flight
  CHECK(wake == QosClock::time_point::max());  // woken by its completion, not a timer
  CHECK(w.HeldBack(0, limits[2], now, wake));  // paused: no timer either
  CHECK(wake == QosClock::time_point::max());
  QosWorker d;
  d.Resize(1);
  d.Charge(0, limits[1], 10 << 20, now);  // 100 ms of its rate, 20 ms of burst
  CHECK(d.HeldBack(0, limits[1], now, wake));
  CHECK(wake - now > milliseconds(70));
  CHECK(wake - now < milliseconds(90));
  CHECK_FALSE(d.HeldBack(0, limits[1], wake, wake));
  CHECK(d.ThrottledSeconds(0, wake) > 0.07);
}

TEST_CASE("a reload keeps class numbers and retires the classes it drops") {
  QosConfig first;
  first.classes = {{"a", 2, 100, {}}, {"b", 1, 100, {}}};
  first.default_class = "a";
  auto t1 = QosTable::Make(first, {ChannelKind::kMemcpy}, nullptr);
  QosConfig second;
  second.classes = {{"c", 1, 100, {}}, {"b", 5, 100, {}}};
  second.default_class = "c";
  auto t2 = QosTable::Make(second, {ChannelKind::kMemcpy}, t1.get());
  REQUIRE(t2->classes.size() == 3);
  CHECK(t2->classes[0].name == "a");
  CHECK(t2->classes[0].retired);
  CHECK(t2->classes[1].weight == 5);  // b keeps its number
  CHECK(t2->Find("a") == 2);          // new copies naming a retired class: the default
  CHECK(t2->Find("") == 2);
}

}  // namespace ISOMETRY_TEST_FILE
