// Every client RPC's request message: the first byte picks the message
// type, the rest is parsed as that message and run through the checks the
// daemon makes before touching memory (fuzz/request_checks.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/request_checks.h"

using namespace isometry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) {
    return 0;
  }
  const uint8_t which = data[0] % 8;
  const void* body = data + 1;
  const int n = static_cast<int>(size - 1);
  switch (which) {
    case 0: {
      v1::RegisterInstanceRequest r;
      if (r.ParseFromArray(body, n)) {
        fuzz::CheckInstanceSpec(r.spec());
      }
      break;
    }
    case 1: {
      v1::CopyRequest r;
      if (r.ParseFromArray(body, n)) {
        fuzz::CheckCopyRequest(r);
      }
      break;
    }
    case 2: {
      v1::ExplainPlanRequest r;
      if (r.ParseFromArray(body, n)) {
        fuzz::CheckExplainPlan(r);
      }
      break;
    }
    case 3: {
      v1::WriteRequest r;
      if (r.ParseFromArray(body, n)) {
        fuzz::CheckWriteRange(r.offset(), r.data().size());
      }
      break;
    }
    case 4: {
      v1::ReadRequest r;
      if (r.ParseFromArray(body, n)) {
        fuzz::CheckWriteRange(r.offset(), r.length());
      }
      break;
    }
    case 5: {
      v1::LocalRequest r;
      if (r.ParseFromArray(body, n)) {
        fuzz::CheckLocalRequest(r);
      }
      break;
    }
    case 6: {
      // Id-only requests: parsing is all the daemon does before a lookup.
      v1::AllocateRequest a;
      v1::FreeRequest f;
      v1::PublishRequest p;
      v1::UnregisterInstanceRequest u;
      v1::WaitRequest w;
      v1::CancelRequest c;
      v1::GetTransferRequest g;
      v1::AttachRequest at;
      (void)a.ParseFromArray(body, n);
      (void)f.ParseFromArray(body, n);
      (void)p.ParseFromArray(body, n);
      (void)u.ParseFromArray(body, n);
      (void)w.ParseFromArray(body, n);
      (void)c.ParseFromArray(body, n);
      (void)g.ParseFromArray(body, n);
      (void)at.ParseFromArray(body, n);
      break;
    }
    case 7: {
      v1::HelloRequest h;
      (void)h.ParseFromArray(body, n);
      break;
    }
  }
  return 0;
}
