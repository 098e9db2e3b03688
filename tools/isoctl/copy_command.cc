// `isoctl copy`: the operator's smoke test of a whole copy through the
// daemon. Everything it makes lives in its own session, so the daemon
// frees it even when isoctl is killed half-way.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "tools/isoctl/commands.h"
#include "tools/isoctl/exit_codes.h"
#include "tools/isoctl/format.h"
#include "tools/isoctl/json.h"
#include "tools/isoctl/render.h"

namespace isometry::isoctl {

namespace {

using Stub = v1::Isometry::Stub;
using SteadyClock = std::chrono::steady_clock;

// Below the daemon's 80 MiB message limit, and small enough that isoctl's
// own memory stays a few MiB whatever the instance size.
constexpr uint64_t kWriteChunkBytes = 4 << 20;
// Reads are capped at 64 MiB by the daemon.
constexpr uint64_t kReadChunkBytes = 16 << 20;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The byte the source holds at `offset` (relative to the instance's start).
uint8_t PatternByte(const CopyArgs& args, uint64_t offset) {
  if (args.pattern == Pattern::kByte) {
    return args.pattern_byte;
  }
  return static_cast<uint8_t>(SplitMix64(offset / 8) >> (8 * (offset % 8)));
}

std::string PatternName(const CopyArgs& args) {
  switch (args.pattern) {
    case Pattern::kNone:
      return "none";
    case Pattern::kHash:
      return "hash";
    case Pattern::kByte: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", args.pattern_byte);
      return buf;
    }
  }
  return "?";
}

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// One side of the copy: its allocation and registered instance.
struct End {
  std::string memory;
  std::string layout;
  uint64_t allocation = 0;
  uint64_t bytes = 0;
  uint64_t instance = 0;
};

Result<End> AllocateAndRegister(Session& session, const std::string& memory,
                                const InstanceShape& shape, const std::string& layout,
                                const ParsedShape& parsed) {
  End end{.memory = memory, .layout = layout};
  v1::AllocateRequest alloc;
  alloc.set_memory(memory);
  alloc.set_bytes(shape.total_bytes());
  v1::AllocateResponse allocated;
  ISO_RETURN_IF_ERROR(session.Call(&Stub::Allocate, alloc, &allocated));
  end.allocation = allocated.allocation();
  end.bytes = allocated.bytes();

  v1::RegisterInstanceRequest reg;
  v1::InstanceSpec* spec = reg.mutable_spec();
  spec->set_allocation(end.allocation);
  spec->set_offset(0);
  BoxToProto(parsed.extents, spec->mutable_bounds());
  FieldsToProto(parsed.fields, spec->mutable_fields());
  spec->set_layout(layout);
  v1::RegisterInstanceResponse registered;
  ISO_RETURN_IF_ERROR(session.Call(&Stub::RegisterInstance, reg, &registered));
  end.instance = registered.instance();
  return end;
}

// Writes the pattern over the whole source allocation, padding included.
Status Fill(Session& session, const CopyArgs& args, const End& src) {
  v1::WriteRequest req;
  req.set_allocation(src.allocation);
  v1::WriteResponse resp;
  for (uint64_t offset = 0; offset < src.bytes; offset += kWriteChunkBytes) {
    const uint64_t n = std::min(kWriteChunkBytes, src.bytes - offset);
    std::string* data = req.mutable_data();
    data->resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      (*data)[i] = static_cast<char>(PatternByte(args, offset + i));
    }
    req.set_offset(offset);
    ISO_RETURN_IF_ERROR(session.Call(&Stub::Write, req, &resp));
  }
  return OkStatus();
}

Result<std::string> ReadAll(Session& session, const End& end) {
  std::string out;
  out.reserve(end.bytes);
  v1::ReadRequest req;
  req.set_allocation(end.allocation);
  for (uint64_t offset = 0; offset < end.bytes; offset += kReadChunkBytes) {
    req.set_offset(offset);
    req.set_length(std::min(kReadChunkBytes, end.bytes - offset));
    v1::ReadResponse resp;
    ISO_RETURN_IF_ERROR(session.Call(&Stub::Read, req, &resp));
    if (resp.data().size() != req.length()) {
      return Internal("isometryd returned ", resp.data().size(), " bytes for a read of ",
                      req.length(), " at offset ", offset, " of allocation ", end.allocation);
    }
    out += resp.data();
  }
  return out;
}

// Compares every (field, point) of the destination with the pattern at the
// same (field, point) of the source. Returns the number of elements checked.
Result<uint64_t> Verify(Session& session, const CopyArgs& args, const End& dst) {
  ISO_ASSIGN_OR_RETURN(const std::string data, ReadAll(session, dst));
  const Box& box = args.src.bounds;
  uint64_t checked = 0;
  for (size_t f = 0; f < args.src.fields.size(); ++f) {
    const uint32_t size = args.src.fields.fields()[f].size;
    std::array<int64_t, kMaxDims> p = box.lo;
    while (true) {
      const uint64_t s = args.src.OffsetOf(f, p);
      const uint64_t d = args.dst.OffsetOf(f, p);
      for (uint32_t k = 0; k < size; ++k) {
        const auto got = static_cast<uint8_t>(data[d + k]);
        const uint8_t want = PatternByte(args, s + k);
        if (got != want) {
          std::string point;
          for (int i = 0; i < box.dims; ++i) {
            StrAppend(&point, i ? "," : "", p[i]);
          }
          char bytes[64];
          std::snprintf(bytes, sizeof bytes, "0x%02x where the source holds 0x%02x", got, want);
          return absl::DataLossError(StrCat("verify: field '", args.src.fields.fields()[f].name,
                                            "' at (", point, ") byte ", k, " of the destination ",
                                            "is ", bytes));
        }
      }
      ++checked;
      int i = 0;
      for (; i < box.dims; ++i) {
        if (++p[i] < box.hi[i]) {
          break;
        }
        p[i] = box.lo[i];
      }
      if (i == box.dims) {
        break;
      }
    }
  }
  return checked;
}

std::string Shape(const ParsedShape& shape) {
  std::string out;
  for (int64_t e : shape.extents) {
    out += (out.empty() ? "" : "x") + std::to_string(e);
  }
  out += " points, fields";
  for (const Field& f : shape.fields) {
    out += " " + f.name + ":" + std::to_string(f.size);
  }
  return out;
}

}  // namespace

Status RunCopy(DaemonClient& client, const Output& out, const CopyArgs& args) {
  const auto say = [&](const std::string& line) {
    if (!out.json) {
      std::printf("%s\n", line.c_str());
    }
  };
  ISO_ASSIGN_OR_RETURN(Session session, Session::Open(client, "isoctl copy"));
  say(StrCat("session ", session.number(), " on unix:", client.socket()));
  const std::string dst_memory = args.dst_memory.empty() ? args.memory : args.dst_memory;
  ISO_ASSIGN_OR_RETURN(const End src, AllocateAndRegister(session, args.memory, args.src,
                                                          args.shape.src_layout, args.shape));
  ISO_ASSIGN_OR_RETURN(const End dst, AllocateAndRegister(session, dst_memory, args.dst,
                                                          args.shape.dst_layout, args.shape));
  Table ends({{"END"},
              {"MEMORY"},
              {"ALLOCATION", Table::Align::kRight},
              {"INSTANCE", Table::Align::kRight},
              {"BYTES", Table::Align::kRight},
              {"LAYOUT"}});
  for (const auto& [name, e] : {std::pair{"source", &src}, std::pair{"destination", &dst}}) {
    ends.AddRow({name, e->memory, std::to_string(e->allocation), std::to_string(e->instance),
                 FormatBytes(e->bytes), e->layout});
  }
  say(Shape(args.shape));
  if (!out.json) {
    std::fputs(ends.Render().c_str(), stdout);
  }

  if (args.pattern != Pattern::kNone) {
    const auto start = SteadyClock::now();
    ISO_RETURN_IF_ERROR(Fill(session, args, src));
    const double s = SecondsSince(start);
    say(StrCat("filled the source with pattern ", PatternName(args), ": ", FormatBytes(src.bytes),
               " in ", FormatDuration(s), " (", FormatRate(static_cast<double>(src.bytes) / s),
               " over gRPC)"));
  }

  v1::CopyRequest req;
  req.set_src_instance(src.instance);
  req.set_dst_instance(dst.instance);
  req.set_priority(args.priority);
  req.set_wait(true);
  for (int i = 0; i < args.repeat; ++i) {
    v1::CopyResponse resp;
    ISO_RETURN_IF_ERROR(session.Call(&Stub::Copy, req, &resp));
    if (out.json) {
      // One document, or JSON Lines when there are several.
      ISO_RETURN_IF_ERROR(PrintJson(resp, args.repeat > 1 ? JsonStyle::kLine : JsonStyle::kPretty));
    } else {
      std::fputs(RenderTransfer(resp.info()).c_str(), stdout);
    }
    ISO_RETURN_IF_ERROR(TransferOutcome(resp.info()));
  }

  if (args.verify) {
    const auto start = SteadyClock::now();
    ISO_ASSIGN_OR_RETURN(const uint64_t checked, Verify(session, args, dst));
    say(StrCat("verified: ", checked, " elements of the destination match the source (",
               FormatDuration(SecondsSince(start)), ")"));
  }
  // Closing the session frees both allocations and their instances.
  session.Close();
  say("session closed; its allocations are freed");
  std::fflush(stdout);
  return OkStatus();
}

}  // namespace isometry::isoctl
