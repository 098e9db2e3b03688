// Datatype::ToString: one line for logs and `isoctl plan`.
#include <string>

#include "core/datatype.h"

namespace isometry {

namespace {

// Lists longer than this print their first entries and "+N more".
constexpr size_t kListShown = 8;

class Printer {
 public:
  explicit Printer(size_t max_chars) : max_(max_chars) {}

  void Type(const Datatype& t) {
    if (Full()) {
      return;
    }
    const DatatypeNode& n = t.node();
    switch (n.kind) {
      case DatatypeKind::kBasic:
        Put(BasicTypeName(n.basic));
        return;
      case DatatypeKind::kContiguous:
        Put("contiguous(", n.count, "; ");
        break;
      case DatatypeKind::kVector:
        Put(n.in_elements ? "vector(" : "hvector(", n.count, ",", n.blocklength, ",", n.stride,
            "B; ");
        break;
      case DatatypeKind::kIndexed:
        Put(n.in_elements ? "indexed([" : "hindexed([");
        Entries(n, false);
        Put("]; ");
        break;
      case DatatypeKind::kIndexedBlock:
        Put(n.in_elements ? "indexed_block(" : "hindexed_block(", n.blocklength, ",[");
        List(n.displacements, "B");
        Put("]; ");
        break;
      case DatatypeKind::kStruct:
        Put("struct([");
        Entries(n, true);
        Put("])");
        return;
      case DatatypeKind::kResized:
        Put("resized(", n.new_lb, ",", n.new_extent, "; ");
        break;
      case DatatypeKind::kSubarray:
        Put("subarray(", n.order == ArrayOrder::kC ? "C" : "F", ",sizes=[");
        List(n.sizes, "");
        Put("],subsizes=[");
        List(n.subsizes, "");
        Put("],starts=[");
        List(n.starts, "");
        Put("]; ");
        break;
      case DatatypeKind::kDarray:
        Darray(n);
        break;
    }
    Type(n.children[0]);
    Put(")");
  }

  std::string Take() && {
    if (out_.size() > max_) {
      out_.resize(max_ >= 3 ? max_ - 3 : 0);
      out_ += "...";
    }
    return std::move(out_);
  }

 private:
  bool Full() const { return out_.size() > max_; }

  template <typename... Args>
  void Put(const Args&... args) {
    if (!Full()) {
      StrAppend(&out_, args...);
    }
  }

  void List(const std::vector<int64_t>& v, const char* unit) {
    for (size_t i = 0; i < v.size() && i < kListShown && !Full(); ++i) {
      Put(i > 0 ? "," : "", v[i], unit);
    }
    if (v.size() > kListShown) {
      Put(",+", v.size() - kListShown, " more");
    }
  }

  // indexed: "len@dispB"; struct: "len*type@dispB".
  void Entries(const DatatypeNode& n, bool types) {
    for (size_t i = 0; i < n.displacements.size() && i < kListShown && !Full(); ++i) {
      Put(i > 0 ? "," : "", n.blocklengths[i]);
      if (types) {
        Put("*");
        Type(n.children[i]);
      }
      Put("@", n.displacements[i], "B");
    }
    if (n.displacements.size() > kListShown) {
      Put(",+", n.displacements.size() - kListShown, " more");
    }
  }

  void Darray(const DatatypeNode& n) {
    Put("darray(rank ", n.rank, "/", n.nprocs, ",", n.order == ArrayOrder::kC ? "C" : "F",
        ",gsizes=[");
    List(n.sizes, "");
    Put("],distribs=[");
    for (size_t i = 0; i < n.distribs.size(); ++i) {
      const char* name = n.distribs[i] == Distribution::kNone    ? "none"
                         : n.distribs[i] == Distribution::kBlock ? "block"
                                                                 : "cyclic";
      Put(i > 0 ? "," : "", name);
      if (n.distribs[i] != Distribution::kNone && n.dargs[i] != kDefaultDarg) {
        Put("(", n.dargs[i], ")");
      }
    }
    Put("],psizes=[");
    List(n.psizes, "");
    Put("]; ");
  }

  size_t max_;
  std::string out_;
};

}  // namespace

std::string Datatype::ToString(size_t max_chars) const {
  Printer p(max_chars);
  p.Type(*this);
  return std::move(p).Take();
}

}  // namespace isometry
