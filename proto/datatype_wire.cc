#include "proto/datatype_wire.h"

#include <string>
#include <vector>

#include "core/strings.h"

namespace isometry::wire {

namespace {

// Decoding state: the path for messages and the depth reached.
struct Decoder {
  const RegisteredDatatypes& registered;

  Result<Datatype> Decode(const v1::Datatype& m, const std::string& path, int depth) const;

  Result<Datatype> Old(bool present, const v1::Datatype& m, const std::string& path,
                       int depth) const {
    if (!present) return InvalidArgument(path, ".old: missing");
    return Decode(m, path + ".old", depth + 1);
  }
};

// A repeated field as a vector, refusing lists longer than any valid
// description can hold before copying them.
template <class Repeated>
Result<std::vector<int64_t>> List(const Repeated& r, const std::string& path, const char* name) {
  if (r.size() > kMaxDatatypeWeight) {
    return InvalidArgument(path, ".", name, ": ", r.size(), " entries (at most ",
                           kMaxDatatypeWeight, ")");
  }
  return std::vector<int64_t>(r.begin(), r.end());
}

Result<BasicType> BasicFromProto(v1::BasicType t, const std::string& path) {
  switch (t) {
    case v1::BASIC_BYTE:
      return BasicType::kByte;
    case v1::BASIC_CHAR:
      return BasicType::kChar;
    case v1::BASIC_INT8:
      return BasicType::kInt8;
    case v1::BASIC_INT16:
      return BasicType::kInt16;
    case v1::BASIC_INT32:
      return BasicType::kInt32;
    case v1::BASIC_INT64:
      return BasicType::kInt64;
    case v1::BASIC_UINT8:
      return BasicType::kUint8;
    case v1::BASIC_UINT16:
      return BasicType::kUint16;
    case v1::BASIC_UINT32:
      return BasicType::kUint32;
    case v1::BASIC_UINT64:
      return BasicType::kUint64;
    case v1::BASIC_FLOAT:
      return BasicType::kFloat;
    case v1::BASIC_DOUBLE:
      return BasicType::kDouble;
    case v1::BASIC_LONG_DOUBLE:
      return BasicType::kLongDouble;
    default:
      return InvalidArgument(path, ".basic: unknown basic type ", static_cast<int>(t));
  }
}

v1::BasicType BasicToProto(BasicType t) {
  return static_cast<v1::BasicType>(static_cast<int>(t) + 1);  // same order, 0 unspecified
}

ArrayOrder OrderFromProto(v1::ArrayOrder o) {
  return o == v1::ORDER_FORTRAN ? ArrayOrder::kFortran : ArrayOrder::kC;
}

Result<std::vector<Distribution>> DistribsFromProto(const v1::TypeDarray& d,
                                                    const std::string& path) {
  if (d.distribs_size() > kMaxArrayDims) {
    return InvalidArgument(path, ".distribs: ", d.distribs_size(), " entries (at most ",
                           kMaxArrayDims, ")");
  }
  std::vector<Distribution> out;
  for (int v : d.distribs()) {
    switch (v) {
      case v1::DISTRIBUTE_NONE:
        out.push_back(Distribution::kNone);
        break;
      case v1::DISTRIBUTE_BLOCK:
        out.push_back(Distribution::kBlock);
        break;
      case v1::DISTRIBUTE_CYCLIC:
        out.push_back(Distribution::kCyclic);
        break;
      default:
        return InvalidArgument(path, ".distribs: unknown distribution ", v);
    }
  }
  return out;
}

Result<Datatype> DecodeStruct(const Decoder& d, const v1::TypeStruct& s, const std::string& path,
                              int depth) {
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, List(s.blocklengths(), path, "blocklengths"));
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> disps, List(s.displacements(), path, "displacements"));
  if (s.types_size() > kMaxDatatypeWeight) {
    return InvalidArgument(path, ".types: too many entries");
  }
  std::vector<Datatype> types;
  types.reserve(static_cast<size_t>(s.types_size()));
  for (int i = 0; i < s.types_size(); ++i) {
    ISO_ASSIGN_OR_RETURN(Datatype t,
                         d.Decode(s.types(i), StrCat(path, ".types[", i, "]"), depth + 1));
    types.push_back(std::move(t));
  }
  return Datatype::Struct(lengths, disps, types);
}

Result<Datatype> DecodeSubarray(const Decoder& d, const v1::TypeSubarray& s,
                                const std::string& path, int depth) {
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, List(s.sizes(), path, "sizes"));
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> subsizes, List(s.subsizes(), path, "subsizes"));
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> starts, List(s.starts(), path, "starts"));
  ISO_ASSIGN_OR_RETURN(Datatype old, d.Old(s.has_old(), s.old(), path, depth));
  return Datatype::Subarray(sizes, subsizes, starts, OrderFromProto(s.order()), old);
}

Result<Datatype> DecodeDarray(const Decoder& d, const v1::TypeDarray& s, const std::string& path,
                              int depth) {
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> gsizes, List(s.gsizes(), path, "gsizes"));
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> dargs, List(s.dargs(), path, "dargs"));
  ISO_ASSIGN_OR_RETURN(std::vector<int64_t> psizes, List(s.psizes(), path, "psizes"));
  ISO_ASSIGN_OR_RETURN(std::vector<Distribution> distribs, DistribsFromProto(s, path));
  ISO_ASSIGN_OR_RETURN(Datatype old, d.Old(s.has_old(), s.old(), path, depth));
  return Datatype::Darray(s.size(), s.rank(), gsizes, distribs, dargs, psizes,
                          OrderFromProto(s.order()), old);
}

Result<Datatype> Decoder::Decode(const v1::Datatype& m, const std::string& path, int depth) const {
  // Checked before descending: a message nested deeper than any valid
  // description is refused without recursing further.
  if (depth > kMaxDatatypeDepth) {
    return InvalidArgument(path, ": nested more than ", kMaxDatatypeDepth, " levels");
  }
  switch (m.type_case()) {
    case v1::Datatype::kBasic: {
      ISO_ASSIGN_OR_RETURN(BasicType t, BasicFromProto(m.basic(), path));
      return Datatype::Basic(t);
    }
    case v1::Datatype::kContiguous: {
      const auto& c = m.contiguous();
      ISO_ASSIGN_OR_RETURN(Datatype old, Old(c.has_old(), c.old(), path + ".contiguous", depth));
      return Datatype::Contiguous(c.count(), old);
    }
    case v1::Datatype::kVector:
    case v1::Datatype::kHvector: {
      const bool h = m.type_case() == v1::Datatype::kHvector;
      const auto& v = h ? m.hvector() : m.vector();
      const std::string p = path + (h ? ".hvector" : ".vector");
      ISO_ASSIGN_OR_RETURN(Datatype old, Old(v.has_old(), v.old(), p, depth));
      return h ? Datatype::Hvector(v.count(), v.blocklength(), v.stride(), old)
               : Datatype::Vector(v.count(), v.blocklength(), v.stride(), old);
    }
    case v1::Datatype::kIndexed:
    case v1::Datatype::kHindexed: {
      const bool h = m.type_case() == v1::Datatype::kHindexed;
      const auto& x = h ? m.hindexed() : m.indexed();
      const std::string p = path + (h ? ".hindexed" : ".indexed");
      ISO_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, List(x.blocklengths(), p, "blocklengths"));
      ISO_ASSIGN_OR_RETURN(std::vector<int64_t> disps, List(x.displacements(), p, "displacements"));
      ISO_ASSIGN_OR_RETURN(Datatype old, Old(x.has_old(), x.old(), p, depth));
      return h ? Datatype::Hindexed(lengths, disps, old) : Datatype::Indexed(lengths, disps, old);
    }
    case v1::Datatype::kIndexedBlock:
    case v1::Datatype::kHindexedBlock: {
      const bool h = m.type_case() == v1::Datatype::kHindexedBlock;
      const auto& x = h ? m.hindexed_block() : m.indexed_block();
      const std::string p = path + (h ? ".hindexed_block" : ".indexed_block");
      ISO_ASSIGN_OR_RETURN(std::vector<int64_t> disps, List(x.displacements(), p, "displacements"));
      ISO_ASSIGN_OR_RETURN(Datatype old, Old(x.has_old(), x.old(), p, depth));
      return h ? Datatype::HindexedBlock(x.blocklength(), disps, old)
               : Datatype::IndexedBlock(x.blocklength(), disps, old);
    }
    case v1::Datatype::kStructType:
      return DecodeStruct(*this, m.struct_type(), path + ".struct_type", depth);
    case v1::Datatype::kSubarray:
      return DecodeSubarray(*this, m.subarray(), path + ".subarray", depth);
    case v1::Datatype::kDarray:
      return DecodeDarray(*this, m.darray(), path + ".darray", depth);
    case v1::Datatype::kResized: {
      const auto& r = m.resized();
      ISO_ASSIGN_OR_RETURN(Datatype old, Old(r.has_old(), r.old(), path + ".resized", depth));
      return Datatype::Resized(old, r.lb(), r.extent());
    }
    case v1::Datatype::kRegistered:
      if (!registered) {
        return InvalidArgument(path, ".registered: datatype handles are not accepted here");
      }
      return registered(m.registered());
    case v1::Datatype::TYPE_NOT_SET:
      break;
  }
  return InvalidArgument(path, ": no type set");
}

// Byte strides and displacements back in elements of `old` where the user
// wrote them so and they divide evenly; false: send the h* form.
bool InElements(const DatatypeNode& n, const std::vector<int64_t>& bytes,
                std::vector<int64_t>* out) {
  const int64_t extent = n.children.empty() ? 0 : n.children[0].extent();
  if (!n.in_elements || extent == 0) return false;
  for (int64_t b : bytes) {
    if (b % extent != 0) return false;
    out->push_back(b / extent);
  }
  return true;
}

void Indexed(const DatatypeNode& n, v1::Datatype* out) {
  std::vector<int64_t> elems;
  const bool in = InElements(n, n.displacements, &elems);
  const std::vector<int64_t>& disps = in ? elems : n.displacements;
  if (n.kind == DatatypeKind::kIndexedBlock) {
    v1::TypeIndexedBlock* b = in ? out->mutable_indexed_block() : out->mutable_hindexed_block();
    b->set_blocklength(n.blocklength);
    b->mutable_displacements()->Add(disps.begin(), disps.end());
    DatatypeToProto(n.children[0], b->mutable_old());
    return;
  }
  v1::TypeIndexed* x = in ? out->mutable_indexed() : out->mutable_hindexed();
  x->mutable_blocklengths()->Add(n.blocklengths.begin(), n.blocklengths.end());
  x->mutable_displacements()->Add(disps.begin(), disps.end());
  DatatypeToProto(n.children[0], x->mutable_old());
}

void Arrays(const DatatypeNode& n, v1::Datatype* out) {
  const v1::ArrayOrder order = n.order == ArrayOrder::kFortran ? v1::ORDER_FORTRAN : v1::ORDER_C;
  if (n.kind == DatatypeKind::kSubarray) {
    v1::TypeSubarray* s = out->mutable_subarray();
    s->mutable_sizes()->Add(n.sizes.begin(), n.sizes.end());
    s->mutable_subsizes()->Add(n.subsizes.begin(), n.subsizes.end());
    s->mutable_starts()->Add(n.starts.begin(), n.starts.end());
    s->set_order(order);
    DatatypeToProto(n.children[0], s->mutable_old());
    return;
  }
  v1::TypeDarray* d = out->mutable_darray();
  d->set_size(n.nprocs);
  d->set_rank(n.rank);
  d->mutable_gsizes()->Add(n.sizes.begin(), n.sizes.end());
  for (Distribution x : n.distribs) {
    d->add_distribs(x == Distribution::kBlock    ? v1::DISTRIBUTE_BLOCK
                    : x == Distribution::kCyclic ? v1::DISTRIBUTE_CYCLIC
                                                 : v1::DISTRIBUTE_NONE);
  }
  d->mutable_dargs()->Add(n.dargs.begin(), n.dargs.end());
  d->mutable_psizes()->Add(n.psizes.begin(), n.psizes.end());
  d->set_order(order);
  DatatypeToProto(n.children[0], d->mutable_old());
}

}  // namespace

Result<Datatype> DatatypeFromProto(const v1::Datatype& msg, const RegisteredDatatypes& registered) {
  return Decoder{registered}.Decode(msg, "datatype", 1);
}

void DatatypeToProto(const Datatype& type, v1::Datatype* out) {
  const DatatypeNode& n = type.node();
  switch (n.kind) {
    case DatatypeKind::kBasic:
      out->set_basic(BasicToProto(n.basic));
      return;
    case DatatypeKind::kContiguous:
      out->mutable_contiguous()->set_count(n.count);
      DatatypeToProto(n.children[0], out->mutable_contiguous()->mutable_old());
      return;
    case DatatypeKind::kVector: {
      std::vector<int64_t> stride;
      const bool in = InElements(n, {n.stride}, &stride);
      v1::TypeVector* v = in ? out->mutable_vector() : out->mutable_hvector();
      v->set_count(n.count);
      v->set_blocklength(n.blocklength);
      v->set_stride(in ? stride[0] : n.stride);
      DatatypeToProto(n.children[0], v->mutable_old());
      return;
    }
    case DatatypeKind::kIndexed:
    case DatatypeKind::kIndexedBlock:
      Indexed(n, out);
      return;
    case DatatypeKind::kStruct: {
      v1::TypeStruct* s = out->mutable_struct_type();
      s->mutable_blocklengths()->Add(n.blocklengths.begin(), n.blocklengths.end());
      s->mutable_displacements()->Add(n.displacements.begin(), n.displacements.end());
      for (const Datatype& t : n.children) DatatypeToProto(t, s->add_types());
      return;
    }
    case DatatypeKind::kResized:
      out->mutable_resized()->set_lb(n.new_lb);
      out->mutable_resized()->set_extent(n.new_extent);
      DatatypeToProto(n.children[0], out->mutable_resized()->mutable_old());
      return;
    case DatatypeKind::kSubarray:
    case DatatypeKind::kDarray:
      Arrays(n, out);
      return;
  }
}

}  // namespace isometry::wire
