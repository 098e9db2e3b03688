#include "layout/chunk_compiler.h"

#include "layout/form_compiler.h"
#include "layout/form_restrict.h"

namespace isometry {
namespace {

// The form of a form end's chunk [begin, end): its form restricted, or its
// layout's runs walked.
Result<CanonicalForm> ChunkForm(const EndForm& e, uint64_t begin, uint64_t end) {
  if (e.layout) return LayoutRangeForm(*e.layout, begin, end);
  return RestrictForm(e.form, begin, end);
}

// A destination form end as a whole form: a chunked layout end stands
// as its dense stream.
CanonicalForm WholeForm(const EndForm& e) {
  if (!e.layout) return e.form;
  return DenseForm(e.bytes);
}

}  // namespace

Result<FormCopy> CompileWhole(const CopyEnd& src, const CopyEnd& dst) {
  if (!src.form && !dst.form) return CompileLayoutCopy(src.shape, dst.shape, src.shape.bounds);
  if (!src.form || !dst.form) return MatchForms(src.form, dst.form, /*has_box=*/false);
  if (src.form->layout) {
    return InvalidArgument("copy: ", src.form->what,
                           " is read chunk by chunk; a whole copy cannot start from it");
  }
  return CompileFormCopy(WholeForm(*src.form), WholeForm(*dst.form));
}

Result<ChunkProgram> ChunkCompiler::Get(const CopyEnd& src, const CopyEnd& dst, const Box& chunk) {
  ChunkProgram out;
  if (!src.form && !dst.form) {
    ISO_ASSIGN_OR_RETURN(out.program, layouts_.Get(src.shape, dst.shape, chunk));
    return out;
  }
  // A stream's chunk k is the range [lo, hi) of its one dimension.
  const auto begin = static_cast<uint64_t>(chunk.lo[0]);
  const auto end = static_cast<uint64_t>(chunk.hi[0]);
  if (chunk.dims != 1 || begin >= end) {
    return InvalidArgument("stream chunk ", ToString(chunk), " is not a range of bytes");
  }
  const EndForm* laid_out = src.form && src.form->layout && !dst.form   ? src.form
                            : dst.form && dst.form->layout && !src.form ? dst.form
                                                                        : nullptr;
  if (laid_out) {
    ISO_ASSIGN_OR_RETURN(CopyProgram p, LayoutSlotProgram(*laid_out->layout, begin, end,
                                                          /*to_layout=*/laid_out == dst.form));
    out.program = std::make_shared<const CopyProgram>(std::move(p));
    return out;
  }
  CanonicalForm in = DenseForm(end - begin), to = DenseForm(end - begin);
  if (src.form) {
    ISO_ASSIGN_OR_RETURN(in, ChunkForm(*src.form, begin, end));
  }
  if (dst.form) {
    ISO_ASSIGN_OR_RETURN(to, ChunkForm(*dst.form, begin, end));
  }
  // Rebased forms have no negative offset, so neither have the shifts.
  const int64_t s0 = in.lowest(), d0 = to.lowest();
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const FormCopy> copy,
                       forms_.Get(ShiftForm(std::move(in), -s0), ShiftForm(std::move(to), -d0)));
  out.src_shift = static_cast<uint64_t>(s0 + copy->src_shift);
  out.dst_shift = static_cast<uint64_t>(d0 + copy->dst_shift);
  out.program = std::shared_ptr<const CopyProgram>(copy, &copy->program);
  return out;
}

}  // namespace isometry
