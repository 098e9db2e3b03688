#include "daemon/runtime/packed_end.h"

#include <algorithm>

#include "layout/form_restrict.h"
#include "procmem/cma_gather.h"

namespace isometry {
namespace {

// The byte past the highest run of `p` (offsets relative to `base`), in
// 128 bits: a hostile form cannot wrap it. (The lowest is FormPiece::lowest.)
__int128 PieceEnd(const FormPiece& p, __int128 base) {
  __int128 hi = base + p.offset;
  for (const FormLoop& l : p.loops) {
    if (l.stride > 0) hi += static_cast<__int128>(l.count - 1) * l.stride;
  }
  if (p.body.empty()) return hi + p.run;
  __int128 end = hi;
  for (const FormPiece& b : p.body) end = std::max(end, PieceEnd(b, hi));
  return end;
}

}  // namespace

CanonicalForm ShiftForm(CanonicalForm form, int64_t delta) {
  for (FormPiece& p : form.pieces) p.offset += delta;
  return form;
}

Result<std::shared_ptr<const PackedEnd>> MakePackedEnd(CanonicalForm form, uint64_t span,
                                                       std::string what) {
  auto end = std::make_shared<PackedEnd>();
  end->bytes = form.bytes();
  if (end->bytes == 0) return InvalidArgument(what, " packs to 0 bytes: nothing to copy");
  if (end->bytes == UINT64_MAX) return InvalidArgument(what, " packs to more than 2^64 bytes");
  bool inside = form.lowest() >= 0;
  for (const FormPiece& p : form.pieces) inside &= PieceEnd(p, 0) <= static_cast<__int128>(span);
  if (!inside) {
    return Internal(what, ": a run of its form lies outside its ", span, " bytes of storage");
  }
  end->runs = form.runs();
  end->span = span;
  end->form = std::move(form);
  end->what = std::move(what);
  return std::shared_ptr<const PackedEnd>(std::move(end));
}

Result<std::shared_ptr<const PackedEnd>> MakeLayoutChunksEnd(LayoutBox l, std::string what) {
  auto end = std::make_shared<PackedEnd>();
  end->bytes = l.bytes();
  if (end->bytes == 0) return InvalidArgument(what, " packs to 0 bytes: nothing to copy");
  end->runs = l.box.volume() * l.shape.fields.size();
  end->span = l.shape.total_bytes();
  end->layout = std::move(l);
  end->what = std::move(what);
  return std::shared_ptr<const PackedEnd>(std::move(end));
}

bool ReadsProcess(const Path& path, const Topology& topo) {
  // Only a kind that reaches process memory (cma) has an edge from it.
  if (path.edges.empty() || path.nodes.empty()) return false;
  const TopologyMemory* m = topo.FindMemory(path.nodes[0].memory);
  return m && m->kind == MemoryKind::kProcess;
}

void CostPackedEnds(Path& path, const PackedEnd& src, const PackedEnd& dst, const Topology& topo) {
  const size_t hops = path.edges.size();
  if (hops == 0 || path.hop_bps.size() != hops || path.run_bytes.size() != hops) return;
  const uint64_t src_run = std::max<uint64_t>(1, src.bytes / std::max<uint64_t>(1, src.runs));
  const uint64_t dst_run = std::max<uint64_t>(1, dst.bytes / std::max<uint64_t>(1, dst.runs));
  path.run_bytes[0] = std::min(path.run_bytes[0], src_run);
  path.run_bytes[hops - 1] = std::min(path.run_bytes[hops - 1], dst_run);
  path.hop_bps[0] = path.edges[0].tp.At(path.run_bytes[0]);
  path.hop_bps[hops - 1] = path.edges[hops - 1].tp.At(path.run_bytes[hops - 1]);
  const uint64_t chunk = path.request_bytes.empty() ? src.bytes : path.request_bytes[0];
  if (ReadsProcess(path, topo) && CmaGathers(src, chunk)) {
    // Gathering: the extent at the channel's modelled byte cost.
    const double density = static_cast<double>(src.bytes) / static_cast<double>(src.span);
    path.hop_bps[0] = std::max(path.hop_bps[0], density / (kCmaExtentByteNanos * 1e-9));
  }
  path.predicted_bps = *std::min_element(path.hop_bps.begin(), path.hop_bps.end());
}

bool CmaGathers(const PackedEnd& src, uint64_t chunk_bytes) {
  if (src.bytes == 0 || chunk_bytes == 0) return false;
  const double chunks = std::max(1.0, static_cast<double>(src.bytes) / chunk_bytes);
  const auto runs = static_cast<uint64_t>(static_cast<double>(src.runs) / chunks);
  const auto extent = static_cast<uint64_t>(static_cast<double>(src.span) / chunks);
  return GatherPays(runs, extent);
}

InstanceShape PackedShape(uint64_t bytes) {
  InstanceShape s;
  s.bounds.dims = 1;
  s.bounds.lo[0] = 0;
  s.bounds.hi[0] = static_cast<int64_t>(bytes);
  s.fields = *FieldSpace::Make({Field{"packed", 1}});
  s.layout = *Layout::Parse("F,x", 1);
  return s;
}

namespace {

// The form of an end's chunk [begin, end): its form restricted, or its
// layout's runs walked.
Result<CanonicalForm> ChunkForm(const PackedEnd& e, uint64_t begin, uint64_t end) {
  if (e.layout) return LayoutRangeForm(*e.layout, begin, end);
  return RestrictForm(e.form, begin, end);
}

}  // namespace

Result<PackedChunk> CompilePackedChunk(FormProgramCache& cache, const PackedEnd* src,
                                       const PackedEnd* dst, uint64_t begin, uint64_t end) {
  if (begin >= end) return InvalidArgument("packed chunk [", begin, ", ", end, ") is empty");
  PackedChunk chunk;
  if ((src && src->layout && !dst) || (dst && dst->layout && !src)) {
    const LayoutBox& l = src ? *src->layout : *dst->layout;
    ISO_ASSIGN_OR_RETURN(CopyProgram p, LayoutSlotProgram(l, begin, end, /*to_layout=*/!src));
    chunk.program = std::make_shared<const CopyProgram>(std::move(p));
    return chunk;
  }
  const CanonicalForm slot{{FormPiece{0, static_cast<int64_t>(end - begin), {}, {}}}};
  CanonicalForm in = slot, out = slot;
  if (src) {
    ISO_ASSIGN_OR_RETURN(in, ChunkForm(*src, begin, end));
  }
  if (dst) {
    ISO_ASSIGN_OR_RETURN(out, ChunkForm(*dst, begin, end));
  }
  // Rebased forms have no negative offset, so neither have the shifts.
  const int64_t s0 = in.lowest(), d0 = out.lowest();
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const FormCopy> copy,
                       cache.Get(ShiftForm(std::move(in), -s0), ShiftForm(std::move(out), -d0)));
  chunk.src_shift = static_cast<uint64_t>(s0 + copy->src_shift);
  chunk.dst_shift = static_cast<uint64_t>(d0 + copy->dst_shift);
  chunk.program = std::shared_ptr<const CopyProgram>(copy, &copy->program);
  return chunk;
}

}  // namespace isometry
