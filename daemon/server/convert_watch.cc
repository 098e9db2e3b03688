#include "daemon/server/convert_watch.h"

namespace isometry {

Result<WatchSpec> WatchSpecFromProto(const v1::WatchRequest& req) {
  WatchSpec w;
  w.allocation = req.allocation();
  w.offset = req.offset();
  w.bytes = req.bytes();
  if (!v1::WatchAction_IsValid(req.action()) || !v1::WatchHandler_IsValid(req.handler()) ||
      !v1::LogFull_IsValid(req.full())) {
    return InvalidArgument("watch: unknown action, handler or full mode");
  }
  w.action = static_cast<active::Action>(req.action());
  w.handler = static_cast<active::Handler>(req.handler());
  w.tag = req.tag();
  w.log_data = !req.no_data();
  w.value_bytes = req.value_bytes() == 0 ? 8 : req.value_bytes();
  w.file_memory = req.file_memory();
  w.file = req.file();
  w.log_bytes = req.log_bytes();
  if (req.full() == v1::LOG_FULL_BLOCK) w.full = LogFullMode::kBlock;
  if (req.full() == v1::LOG_FULL_FAIL) w.full = LogFullMode::kFail;
  if (w.handler == active::Handler::kFileLog && (w.file_memory.empty() || w.file.empty())) {
    return InvalidArgument("watch: HANDLER_FILE_LOG needs file_memory and file");
  }
  return w;
}

void ToProto(const WatchReport& r, v1::WatchInfo* out) {
  out->set_allocation(r.allocation);
  out->set_owner_session(r.owner_session);
  out->set_log_bytes(r.log_bytes);
  out->set_log_published(r.published);
  out->set_log_acknowledged(r.acknowledged);
  out->set_entries(r.entries);
  out->set_pending_copies(r.pending_copies);
  out->set_full(r.full_mode);
  for (const RegionStats& s : r.regions) {
    v1::WatchedRegion* g = out->add_regions();
    g->set_region(s.region.id);
    g->set_offset(s.region.begin);
    g->set_bytes(s.region.end - s.region.begin);
    g->set_action(static_cast<v1::WatchAction>(s.region.action));
    g->set_handler(static_cast<v1::WatchHandler>(s.region.handler));
    g->set_tag(s.region.tag);
    g->set_puts(s.puts);
    g->set_gets(s.gets);
    g->set_bytes_accessed(s.bytes);
    g->set_denied(s.denied);
    g->set_inserts(s.inserts);
    g->set_dirty_pages(s.dirty_pages);
  }
}

static_assert(v1::ACCESS_PUT == static_cast<int>(active::LogOp::kPut) &&
              v1::ACCESS_GET == static_cast<int>(active::LogOp::kGet));

void ToProto(std::vector<LoggedAccess> entries, v1::AccessLogBatch* out) {
  out->Clear();
  for (LoggedAccess& a : entries) {
    const active::LogEntry& e = a.entry;
    v1::AccessLogEntry* p = out->add_entries();
    p->set_seq(e.seq);
    p->set_op(static_cast<v1::AccessOp>(e.op));  // LogOp's kPut/kGet are the proto's
    p->set_applied((e.flags & active::kLogApplied) != 0);
    p->set_has_data((e.flags & active::kLogHasData) != 0);
    p->set_notify((e.flags & active::kLogNotify) != 0);
    p->set_offset(e.offset);
    p->set_size(e.size);
    p->set_transfer(e.transfer);
    p->set_region(e.region);
    p->set_tag(e.tag);
    p->set_source_session(e.source_session);
    p->set_source_node(e.source_node);
    *p->mutable_data() = std::move(a.data);
  }
}

void AddWatches(const std::vector<WatchReport>& watches, v1::StatusResponse* out) {
  for (const WatchReport& w : watches) ToProto(w, out->add_watches());
}

}  // namespace isometry
