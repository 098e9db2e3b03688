// isoctl: the operator CLI of isometryd. Parses the command line, connects
// to the daemon's gRPC unix socket and runs one subcommand (commands.h).
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "core/main_guard.h"
#include "core/strings.h"
#include "tools/isoctl/commands.h"
#include "tools/isoctl/completion.h"
#include "tools/isoctl/exit_codes.h"
#include "tools/isoctl/operator_token.h"
#include "tools/isoctl/suggest.h"
#include "tools/isoctl/watch.h"

using namespace isometry;
using namespace isometry::isoctl;

namespace {

constexpr char kDefaultSocket[] = "/run/isometry/grpc.sock";
constexpr char kSocketEnv[] = "ISOMETRY_SOCKET";
constexpr char kTokenEnv[] = "ISOMETRY_OPERATOR_TOKEN";
constexpr char kDefaultTokenFile[] = "/var/lib/isometry/operator.token";

// The environment's token file; null when unset.
const char* TokenFileFromEnv() {
  const char* env = std::getenv(kTokenEnv);
  return env && *env ? env : nullptr;
}

constexpr char kFooter[] = R"(Global options go before or after the command (isoctl --help):
  --socket PATH, -o/--output table|wide|json|yaml, --json, --timeout-ms N,
  --operator-token FILE

Exit codes:
  0  success
  1  isometryd answered with an error (its gRPC code and message go to
     stderr), or the transfer copied or waited for did not end "done"
  2  usage error
  3  isometryd cannot be reached on its socket
  4  health: degraded (a warning)
  5  health: unhealthy

Environment:
  ISOMETRY_SOCKET          the default for --socket
  ISOMETRY_OPERATOR_TOKEN  the default for --operator-token)";

std::string DefaultSocket() {
  const char* env = std::getenv(kSocketEnv);
  return env && *env ? env : kDefaultSocket;
}

// "hash", "none", or one byte: "0x5a", "90".
Status ParsePattern(const std::string& text, CopyArgs& args) {
  if (text == "hash") {
    args.pattern = Pattern::kHash;
  } else if (text == "none") {
    args.pattern = Pattern::kNone;
  } else {
    const bool hex = text.size() > 2 && (text.starts_with("0x") || text.starts_with("0X"));
    std::optional<uint32_t> v;
    if (hex) {
      uint32_t x = 0;
      const auto [end, ec] = std::from_chars(text.data() + 2, text.data() + text.size(), x, 16);
      if (ec == std::errc() && end == text.data() + text.size()) {
        v = x;
      }
    } else {
      v = ParseNumber<uint32_t>(text);
    }
    if (!v || *v > 255) {
      return UsageError(StrCat("--pattern '", text, "': expected hash, none or a byte (0x5a)"));
    }
    args.pattern = Pattern::kByte;
    args.pattern_byte = static_cast<uint8_t>(*v);
  }
  return OkStatus();
}

void AddShapeOptions(CLI::App* cmd, ShapeArgs& shape) {
  cmd->add_option("--extents", shape.extents, "index space, x first: 1048576, 1024x1024, ...")
      ->capture_default_str();
  cmd->add_option("--fields", shape.fields, "fields NAME:BYTES,... (default: one 8-byte field f0)");
  // The AOS of docs/concepts/layouts.md is C order (F,y,x); the default here is Fortran order.
  cmd->add_option("--src-layout", shape.src_layout,
                  "source layout (default: F,x[,y...]: AOS in Fortran order, x varies fastest "
                  "after F; AOS in C order is F,[...y,]x, SOA [...y,]x,F)");
  cmd->add_option("--dst-layout", shape.dst_layout,
                  "destination layout (default: F,x[,y...], as --src-layout)");
}

int Fail(const Status& s) {
  std::fflush(stdout);  // what was printed before the error comes first
  std::fprintf(stderr, "isoctl: %s\n", Describe(s).c_str());
  if (ExitCodeOf(s) == kExitUsage) {
    std::fprintf(stderr, "Run with --help for more information.\n");
  }
  return ExitCodeOf(s);
}

// Everything the command line sets: the global options, each subcommand's
// arguments, and what the chosen subcommand does. CLI11 binds its options
// to these fields, so one Invocation outlives parsing.
struct Invocation {
  ConnectOptions connect{.socket = DefaultSocket()};
  Output output;
  std::string output_text = "table";  // -o; checked by PrepareOutput
  CLI::Option* output_option = nullptr;
  // copy and top print a table or JSON only (not wide, not yaml).
  bool table_or_json_only = false;
  uint32_t timeout_ms = 10000;
  CLI::Option* timeout_option = nullptr;
  std::string token_file = TokenFileFromEnv() ? TokenFileFromEnv() : kDefaultTokenFile;
  CLI::Option* token_option = nullptr;

  // Each subcommand sets `run`, and `prepare` when its options need more
  // checks than CLI11 makes; the daemon is asked only once both succeeded.
  std::function<Status()> prepare = [] { return OkStatus(); };
  std::function<Status(DaemonClient&)> run;
  // A subcommand that needs no daemon (completion) sets this instead.
  std::function<Status()> local;

  std::optional<uint64_t> transfer_id;
  bool transfers_recent = false;
  TopArgs top;
  ShapeArgs plan_shape;
  std::string plan_src_type, plan_dst_type;
  PlanArgs plan;
  ShapeArgs copy_shape;
  CopyArgs copy;
  std::string pattern = "hash";
  uint64_t cancel_id = 0;
  uint64_t explain_id = 0;
  uint64_t qos_session = 0;
  std::string qos_class;
  OrphansArgs orphans;
  WaitArgs wait;
  std::string checkpoint_memory, checkpoint_file;
  std::string completion_shell;
};

void AddGlobalOptions(CLI::App& app, Invocation& inv) {
  app.set_version_flag("--version", std::string("isoctl ") + ISOMETRY_VERSION);
  app.footer(kFooter);
  app.require_subcommand(1);
  // Global options may also follow the subcommand: `isoctl status --json`.
  app.fallthrough();

  app.add_option("--socket", inv.connect.socket,
                 StrCat("isometryd's gRPC unix socket (default: $", kSocketEnv, ", else ",
                        kDefaultSocket, ")"));
  inv.output_option =
      app.add_option("-o,--output", inv.output_text,
                     "output format - table (default), wide (the table with every column), json "
                     "(the daemon's "
                     "response: proto field names, every field, integers as numbers) or yaml "
                     "(the same document as YAML); copy and top: table or json")
          ->type_name("FORMAT");
  app.add_flag("--json", inv.output.json, "the same as -o json");
  inv.timeout_option =
      app.add_option("--timeout-ms", inv.timeout_ms,
                     "deadline of each call to isometryd, and when given, of `wait` too (a "
                     "transfer still running then fails the wait with DEADLINE_EXCEEDED); 0: none")
          ->capture_default_str();
  inv.token_option = app.add_option(
      "--operator-token", inv.token_file,
      StrCat("file with the daemon's operator token, needed to cancel other clients' "
             "transfers (default: $",
             kTokenEnv, ", else ", kDefaultTokenFile, "). A file named here or in $", kTokenEnv,
             " must be readable; the default is "
             "used when readable; \"\" sends no token"));
}

// -w/--watch on a listing: print it again every SECONDS (watch.h).
CLI::App* Watchable(CLI::App* cmd, Invocation& inv) {
  cmd->add_option("-w,--watch", inv.output.watch_s,
                  "print again every SECONDS until Ctrl-C/SIGTERM (exit 0; health: the last "
                  "verdict's code); json: one line a frame with a \"time\" field, yaml: one "
                  "\"---\" document a frame")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.01, 86400.0, "0.01..86400"));
  return cmd;
}

// The subcommands that take no arguments, and `transfers`.
void AddListCommands(CLI::App& app, Invocation& inv) {
  const Output& output = inv.output;
  Watchable(app.add_subcommand("status", "daemon version, uptime, sessions and transfer counters"),
            inv)
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunStatus(c, output); }; });
  Watchable(app.add_subcommand("peers",
                               "the cluster's peer daemons: state, round trip, data connections"),
            inv)
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunPeers(c, output); }; });

  Watchable(app.add_subcommand("health",
                               "one verdict: daemon, peers, pools, channels; exit 0 healthy, 4 "
                               "degraded, 5 unhealthy"),
            inv)
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunHealth(c, output); }; });

  app.add_subcommand("calibrate", "measure every channel's throughput function again")
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunCalibrate(c, output); }; });

  Watchable(app.add_subcommand("memories", "memories with their client pools and staging budgets"),
            inv)
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunMemories(c, output); }; });

  Watchable(app.add_subcommand("sessions",
                               "every session: client, uid, pid, age, what it holds and its "
                               "transfers in flight (operator token)"),
            inv)
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunSessions(c, output); }; });
  Watchable(app.add_subcommand("allocations",
                               "every allocation: memory, size, owner session (or the orphan's "
                               "uid), published, watched (operator token)"),
            inv)
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunAllocations(c, output); }; });
  Watchable(app.add_subcommand("watches",
                               "the watched allocations (Active Access): regions, "
                               "log use, pending copies"),
            inv)
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunWatches(c, output); }; });

  Watchable(app.add_subcommand("channels",
                               "live queue table: in flight/max, XDs queued by priority, requests "
                               "done, bytes moved, current and peak throughput, rate cap"),
            inv)
      ->callback([&] { inv.run = [&](DaemonClient& c) { return RunChannels(c, output); }; });

  CLI::App* transfers = Watchable(
      app.add_subcommand("transfers",
                         "transfers in flight with per-hop progress, one transfer by ID, or "
                         "(--recent) the last ones that ended"),
      inv);
  CLI::Option* id =
      transfers->add_option("ID", inv.transfer_id, "one transfer, in flight or recently ended");
  transfers
      ->add_flag("--recent", inv.transfers_recent,
                 "the ended transfers the daemon keeps (daemon.transfer_history), newest first: "
                 "state, bytes, duration, path, predicted and measured rate, error")
      ->excludes(id);
  transfers->callback([&] {
    inv.run = [&](DaemonClient& c) {
      return RunTransfers(c, output, inv.transfer_id, inv.transfers_recent);
    };
  });
}

void AddTopCommand(CLI::App& app, Invocation& inv) {
  CLI::App* top_cmd = app.add_subcommand(
      "top",
      "live view of channels, transfers, peers and memories until q or Ctrl-C: full screen "
      "with keys on a terminal (? lists them), else frames printed one after another");
  top_cmd->add_option("--interval-ms", inv.top.interval_ms, "refresh period")
      ->capture_default_str()
      ->check(CLI::Range(10, 3600 * 1000, "10..3600000"));
  top_cmd->add_option("--iterations", inv.top.iterations, "stop after N refreshes; 0: until Ctrl-C")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max(), "NONNEGATIVE"));
  top_cmd->add_flag("--once", inv.top.once,
                    "print one frame and exit (as on a pipe: no full screen, no keys)");
  top_cmd->callback([&] {
    inv.table_or_json_only = true;
    inv.run = [&](DaemonClient& c) { return RunTop(c, inv.output, inv.top); };
  });
}

void AddPlanCommand(CLI::App& app, Invocation& inv) {
  PlanArgs& plan = inv.plan;
  CLI::App* plan_cmd =
      Watchable(app.add_subcommand("plan", "explain how isometryd would copy SRC to DST"), inv);
  plan_cmd->add_option("SRC", plan.src_memory, "source memory name")->required();
  plan_cmd->add_option("DST", plan.dst_memory, "destination memory name")->required();
  AddShapeOptions(plan_cmd, inv.plan_shape);
  const auto nonnegative =
      CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max(), "NONNEGATIVE");
  plan_cmd->add_option("--src-type", inv.plan_src_type,
                       "source as an MPI-style datatype instead of a layout, e.g. "
                       "\"vector(1024,8,16,byte)\" (docs/reference/cli.md, \"Datatype text\")");
  plan_cmd->add_option("--src-count", plan.src_count, "elements of --src-type")
      ->capture_default_str()
      ->check(nonnegative);
  plan_cmd->add_option("--dst-type", inv.plan_dst_type,
                       "destination as a datatype instead of a layout (as --src-type)");
  plan_cmd->add_option("--dst-count", plan.dst_count, "elements of --dst-type")
      ->capture_default_str()
      ->check(nonnegative);
  plan_cmd->callback([&] {
    inv.prepare = [&]() -> Status {
      ISO_ASSIGN_OR_RETURN(
          plan.src_type, ParseTypeOption(inv.plan_src_type, "--src-type", inv.plan_shape.src_layout,
                                         "--src-layout"));
      ISO_ASSIGN_OR_RETURN(
          plan.dst_type, ParseTypeOption(inv.plan_dst_type, "--dst-type", inv.plan_shape.dst_layout,
                                         "--dst-layout"));
      ISO_ASSIGN_OR_RETURN(plan.shape, ParseShapeArgs(inv.plan_shape));
      // Checked here as for `copy`, so that a bad shape is a usage error;
      // only a side described by a layout has one.
      if (!plan.src_type) {
        ISO_RETURN_IF_ERROR(MakeShape(plan.shape, plan.shape.src_layout, "--src-layout").status());
      }
      if (!plan.dst_type) {
        ISO_RETURN_IF_ERROR(MakeShape(plan.shape, plan.shape.dst_layout, "--dst-layout").status());
      }
      return OkStatus();
    };
    inv.run = [&](DaemonClient& c) { return RunPlan(c, inv.output, plan); };
  });
}

void AddCopyCommand(CLI::App& app, Invocation& inv) {
  CopyArgs& copy = inv.copy;
  CLI::App* copy_cmd = app.add_subcommand(
      "copy",
      "smoke test: in a session of its own, allocate a source and a destination, fill the "
      "source, copy it and report the transfer; the session's end frees everything");
  copy_cmd->add_option("--memory", copy.memory, "memory of both allocations")
      ->capture_default_str();
  copy_cmd->add_option("--dst-memory", copy.dst_memory,
                       "memory of the destination (default: --memory)");
  AddShapeOptions(copy_cmd, inv.copy_shape);
  copy_cmd->add_option("--priority", copy.priority, "transfer priority, higher first")
      ->capture_default_str();
  copy_cmd->add_option("--pattern", inv.pattern, "source contents: hash, none, or a byte (0x5a)")
      ->capture_default_str();
  copy_cmd->add_flag("--verify", copy.verify,
                     "read the destination back (into isoctl's memory) and compare every "
                     "element with the source");
  copy_cmd->add_option("--repeat", copy.repeat, "copies of the same instances, one after another")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000, "1..1000000"));
  copy_cmd->callback([&] {
    inv.table_or_json_only = true;
    inv.prepare = [&]() -> Status {
      ISO_RETURN_IF_ERROR(ParsePattern(inv.pattern, copy));
      if (copy.verify && copy.pattern == Pattern::kNone) {
        return UsageError("--verify needs a --pattern other than none");
      }
      ISO_ASSIGN_OR_RETURN(copy.shape, ParseShapeArgs(inv.copy_shape));
      ISO_ASSIGN_OR_RETURN(copy.src, MakeShape(copy.shape, copy.shape.src_layout, "--src-layout"));
      ISO_ASSIGN_OR_RETURN(copy.dst, MakeShape(copy.shape, copy.shape.dst_layout, "--dst-layout"));
      return OkStatus();
    };
    inv.run = [&](DaemonClient& c) { return RunCopy(c, inv.output, copy); };
  });
}

void AddCancelCommand(CLI::App& app, Invocation& inv) {
  CLI::App* cancel_cmd = app.add_subcommand("cancel", "cancel a transfer in flight");
  cancel_cmd->add_option("ID", inv.cancel_id, "transfer id")->required();
  cancel_cmd->callback(
      [&] { inv.run = [&](DaemonClient& c) { return RunCancel(c, inv.output, inv.cancel_id); }; });
}

void AddExplainCommand(CLI::App& app, Invocation& inv) {
  CLI::App* cmd = app.add_subcommand(
      "explain",
      "why a transfer took its path: the paths it could have taken with their predicted rates and "
      "what ruled each out, and its measured rate against the predicted one (its session or the "
      "operator token)");
  cmd->add_option("ID", inv.explain_id, "transfer id, in flight or recently ended")->required();
  cmd->callback([&] {
    inv.run = [&](DaemonClient& c) { return RunExplain(c, inv.output, inv.explain_id); };
  });
}

void AddQosCommand(CLI::App& app, Invocation& inv) {
  CLI::App* cmd = Watchable(
      app.add_subcommand("qos",
                         "traffic classes: weight, priority ceiling, members, clamped copies, "
                         "and each class's share of each channel against its weight, caps and "
                         "throttled time (members: operator token)"),
      inv);
  cmd->callback([&] {
    if (!inv.run) inv.run = [&](DaemonClient& c) { return RunQos(c, inv.output); };
  });
  CLI::App* move = cmd->add_subcommand(
      "move", "put a session in a traffic class until it ends (operator token)");
  move->add_option("SESSION", inv.qos_session, "session number (isoctl sessions)")->required();
  move->add_option("CLASS", inv.qos_class, "class name (isoctl qos)")->required();
  move->callback([&] {
    inv.run = [&](DaemonClient& c) { return RunQosMove(c, inv.qos_session, inv.qos_class); };
  });
}

void AddOrphansCommand(CLI::App& app, Invocation& inv) {
  CLI::App* cmd = Watchable(
      app.add_subcommand(
          "orphans",
          "list published allocations whose owner's session ended, or free them (operator token)"),
      inv);
  cmd->add_option("--free", inv.orphans.free, "free this orphan (repeatable)");
  cmd->add_flag("--free-all", inv.orphans.free_all, "free every orphan");
  cmd->callback([&] {
    inv.prepare = [&]() -> Status {
      if (inv.output.watch_s > 0 && (inv.orphans.free_all || !inv.orphans.free.empty())) {
        return UsageError("--watch lists orphans again and again; it does not free them");
      }
      return OkStatus();
    };
    inv.run = [&](DaemonClient& c) { return RunOrphans(c, inv.output, inv.orphans); };
  });
}

void AddCheckpointCommand(CLI::App& app, Invocation& inv) {
  CLI::App* cmd = app.add_subcommand(
      "checkpoint-compact", "merge a checkpoint's delta chain (FILE.delta) into its base FILE");
  cmd->add_option("MEMORY", inv.checkpoint_memory, "the DSK memory")->required();
  cmd->add_option("FILE", inv.checkpoint_file, "the base image, relative to its directory")
      ->required();
  cmd->callback([&] {
    inv.run = [&](DaemonClient& c) {
      return RunCompactCheckpoint(c, inv.output, inv.checkpoint_memory, inv.checkpoint_file);
    };
  });
}

void AddWaitCommand(CLI::App& app, Invocation& inv) {
  CLI::App* wait_cmd =
      app.add_subcommand("wait", "wait until a transfer ends; fails unless it ends \"done\"");
  wait_cmd->add_option("ID", inv.wait.id, "transfer id")->required();
  wait_cmd
      ->add_option("--timeout-ms", inv.wait.timeout_ms,
                   "give up (DEADLINE_EXCEEDED, exit 1) when the transfer is still running "
                   "after this long; 0: the global --timeout-ms if given (isoctl --timeout-ms N "
                   "wait ID), else wait until it ends")
      ->capture_default_str();
  wait_cmd->callback([&] {
    inv.run = [&](DaemonClient& c) {
      // The global --timeout-ms, given before the subcommand, bounds the
      // wait as it bounds every other call; without it a wait has no limit
      // (the default 10 s would cut short waits for long transfers).
      WaitArgs bounded = inv.wait;
      if (bounded.timeout_ms == 0 && inv.timeout_option->count() > 0) {
        bounded.timeout_ms = inv.timeout_ms;
      }
      return RunWait(c, inv.output, bounded);
    };
  });
}

// `isoctl completion SHELL`: the script for SHELL, from the commands above.
void AddCompletionCommand(CLI::App& app, Invocation& inv) {
  CLI::App* cmd = app.add_subcommand(
      "completion",
      "print a shell completion script: source <(isoctl completion bash); zsh and fish too");
  cmd->add_option("SHELL", inv.completion_shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  cmd->callback([&] {
    inv.local = [&]() -> Status {
      OptionValues values;
      for (const Format f : {Format::kTable, Format::kWide, Format::kJson, Format::kYaml}) {
        values["output"].push_back(FormatName(f));
      }
      ISO_ASSIGN_OR_RETURN(std::string script, CompletionScript(app, inv.completion_shell, values));
      std::fputs(script.c_str(), stdout);
      return OkStatus();
    };
  });
}

// The exit code when parsing ends the run (--help, --version, a usage
// error), nullopt when a subcommand is to run.
std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version "fail" with success; every real parse error is
    // a usage error, whatever CLI11's own code for it.
    const int code = app.exit(e);
    if (code == 0) {
      return kExitOk;
    }
    if (std::optional<std::string> hint = SuggestionFor(app, argc, argv)) {
      std::fprintf(stderr, "isoctl: %s\n", hint->c_str());
    }
    return kExitUsage;
  }
  return std::nullopt;
}

// -o and --json into inv.output: a usage error for an unknown format, for
// --json with another -o, and for wide or yaml where there is only a
// table or JSON.
Status PrepareOutput(Invocation& inv, const std::string& command) {
  ISO_ASSIGN_OR_RETURN(const Format format, ParseFormat(inv.output_text));
  const bool named = inv.output_option->count() > 0;
  if (inv.output.json && named && format != Format::kJson) {
    return UsageError(StrCat("--json is -o json; it cannot go with -o ", FormatName(format)));
  }
  inv.output.format = inv.output.json ? Format::kJson : format;
  inv.output.json = inv.output.format == Format::kJson;
  if (inv.table_or_json_only && inv.output.format != Format::kTable && !inv.output.json) {
    return UsageError(
        StrCat("-o ", FormatName(inv.output.format), ": `", command, "` prints table or json"));
  }
  return OkStatus();
}

// "isoctl status -o wide -w 2": the title of a watched table.
std::string CommandLine(int argc, char** argv) {
  std::string out = "isoctl";
  for (int i = 1; i < argc; ++i) {
    out += StrCat(" ", argv[i]);
  }
  return out;
}

// Reads the operator token and connects with the global options.
Result<std::unique_ptr<DaemonClient>> Connect(Invocation& inv) {
  inv.connect.timeout = std::chrono::milliseconds(inv.timeout_ms);
  const bool token_named = inv.token_option->count() > 0 || TokenFileFromEnv() != nullptr;
  ISO_ASSIGN_OR_RETURN(inv.connect.operator_token, ReadOperatorToken(inv.token_file, token_named));
  return DaemonClient::Connect(inv.connect);
}

int Main(int argc, char** argv) {
  CLI::App app{"isoctl: inspect and drive the local isometryd over its gRPC unix socket"};
  Invocation inv;
  AddGlobalOptions(app, inv);
  AddListCommands(app, inv);
  AddTopCommand(app, inv);
  AddPlanCommand(app, inv);
  AddCopyCommand(app, inv);
  AddCancelCommand(app, inv);
  AddExplainCommand(app, inv);
  AddQosCommand(app, inv);
  AddOrphansCommand(app, inv);
  AddWaitCommand(app, inv);
  AddCheckpointCommand(app, inv);
  AddCompletionCommand(app, inv);

  if (std::optional<int> code = Parse(app, argc, argv)) {
    return *code;
  }
  if (inv.local) {
    const Status s = inv.local();
    return s.ok() ? kExitOk : Fail(s);
  }
  if (!inv.run) {
    return Fail(UsageError("a subcommand is required"));
  }
  // Usage errors come before connecting, so they are reported as such even
  // without a daemon.
  const std::string command = app.get_subcommands().front()->get_name();
  if (Status s = PrepareOutput(inv, command); !s.ok()) {
    return Fail(s);
  }
  if (Status s = inv.prepare(); !s.ok()) {
    return Fail(s);
  }
  auto client = Connect(inv);
  if (!client.ok()) {
    return Fail(client.status());
  }
  const Status s = inv.output.watch_s > 0 ? RunWatch(inv.output, CommandLine(argc, argv),
                                                     [&] { return inv.run(**client); })
                                          : inv.run(**client);
  return s.ok() ? kExitOk : Fail(s);
}

}  // namespace

int main(int argc, char** argv) {
  return isometry::RunMain("isoctl", kExitDaemonError, Main, argc, argv);
}
