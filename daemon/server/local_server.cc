#include "daemon/server/local_server.h"

#include <absl/synchronization/mutex.h>
#include <poll.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>
#include <thread>

#include "core/cpu_claims.h"
#include "core/log_limiter.h"
#include "core/spin_wait.h"
#include "core/strings.h"
#include "core/thread_name.h"
#include "core/thread_slice.h"
#include "core/unique_fd.h"
#include "daemon/node/copies.h"
#include "daemon/node/sessions.h"
#include "daemon/node/shared_memory.h"
#include "daemon/server/local_client.h"
#include "daemon/server/local_requests.h"
#include "daemon/server/task_limit.h"
#include "isometry.pb.h"
#include "proto/local_wire.h"
#include "proto/ring_abi.h"
#include "proto/ring_validate.h"

namespace isometry {

namespace {

Status Errno(const std::string& what) { return Internal(what, ": ", ErrnoString(errno)); }

}  // namespace

struct LocalServer::Impl {
  Node& node;
  std::string path;
  UniqueFd listener;
  UniqueFd epoll;
  UniqueFd wake;  // stops the ring thread
  std::atomic<bool> stopping{false};
  std::thread accept_thread, ring_thread;
  // Control threads that have not left yet (they are detached): the
  // destructor waits for none to be left before the state goes.
  std::atomic<uint32_t> live_threads{0};
  // Connection threads allowed: daemon.max_connection_threads, or fewer
  // where the task limit at start has no room for that many (then `why`
  // says so). Constant after Start.
  uint64_t thread_cap = 0;
  std::string thread_cap_why;
  absl::Mutex mu;
  std::map<uint64_t, std::shared_ptr<LocalClient>> clients ABSL_GUARDED_BY(mu);
  uint64_t next_key ABSL_GUARDED_BY(mu) = 1;
  // Warnings a client can trigger at will (refused connections, broken
  // frames, a runaway ring tail): a few lines per uid per 10 s, then one
  // line with the count of the rest.
  LogLimiter warnings{5, std::chrono::seconds(10)};

  // Writes `line` unless this uid has had its share of warnings lately.
  void WarnLimited(uid_t uid, const std::string& line) {
    const LogLimiter::Verdict v = warnings.Allow(std::to_string(uid));
    if (!v.log) return;
    if (v.suppressed > 0) {
      spdlog::warn("local clients of uid {}: {} similar line(s) suppressed", uid, v.suppressed);
    }
    spdlog::warn("{}", line);
  }

  explicit Impl(Node& n) : node(n) {}

  // Whether a new connection of `uid` is within the bounds: max_sessions
  // and max_connection_threads for all together, max_connections_per_uid
  // and (before hello) max_pending_hellos_per_uid for its uid.
  Status AdmitLocked(uid_t uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const DaemonConfig& dc = node.config().daemon;
    if (clients.size() >= dc.max_sessions) {
      return ResourceExhausted("too many local connections (", clients.size(),
                               "); daemon.max_sessions is ", dc.max_sessions);
    }
    if (clients.size() >= thread_cap) {
      return ResourceExhausted("every local connection thread is taken (", clients.size(),
                               "); daemon.max_connection_threads is ", dc.max_connection_threads,
                               thread_cap_why);
    }
    uint32_t same = 0, pending = 0;
    for (const auto& [key, other] : clients) {
      if (other->creds.uid != uid) continue;
      ++same;
      pending += !other->attached;
    }
    if (same >= dc.max_connections_per_uid) {
      return ResourceExhausted("uid ", uid, " already has ", same,
                               " connections to the local socket; "
                               "daemon.max_connections_per_uid is ",
                               dc.max_connections_per_uid);
    }
    if (pending >= dc.max_pending_hellos_per_uid) {
      return ResourceExhausted("uid ", uid, " already has ", pending,
                               " local connections that have not said hello; "
                               "daemon.max_pending_hellos_per_uid is ",
                               dc.max_pending_hellos_per_uid);
    }
    return OkStatus();
  }

  // Starts the thread that serves `c` (registered in `clients`). A thread
  // the system refuses (the task limit: systemd's TasksMax=, a cgroup's
  // pids.max, RLIMIT_NPROC) unregisters `c` and returns the refusal.
  Status StartControlThreadLocked(const std::shared_ptr<LocalClient>& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    live_threads.fetch_add(1);
    try {
      c->thread = std::thread([this, c] {
        NameThisThread("iso-session");
        ServeControl(c);
        live_threads.fetch_sub(1);  // the last touch of *this
      });
      return OkStatus();
    } catch (const std::system_error& e) {
      NoteThreadRefused();
      live_threads.fetch_sub(1);
      clients.erase(c->key);
      return ResourceExhausted("the daemon cannot start a thread for this connection (", e.what(),
                               "): it is at its task limit (TasksMax=, pids.max or "
                               "RLIMIT_NPROC); daemon.max_connection_threads is ",
                               node.config().daemon.max_connection_threads);
    }
  }

  // Tells a refused client why (best effort, never blocking) and closes it.
  void Refuse(UniqueFd fd, uid_t uid, const Status& why) {
    v1::LocalResponse resp;
    resp.set_code(static_cast<int32_t>(why.code()));
    resp.set_message(std::string(why.message()));
    timeval quick{0, 1000};
    setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &quick, sizeof quick);
    (void)wire::SendFrame(fd.get(), resp);
    fd.reset();
    WarnLimited(uid, StrCat("local connection of uid ", uid, " refused: ", why.message()));
  }

  // Closes connections that did not complete hello in time: a client
  // that connects and says nothing (or a byte now and then) holds a
  // thread and a slot only until daemon.hello_timeout_ms.
  // The only deadline before hello: reads block without a timeout.
  void CloseLateHellos() {
    const uint32_t ms = node.config().daemon.hello_timeout_ms;
    const auto now = std::chrono::steady_clock::now();
    std::vector<Credentials> late;
    {
      absl::MutexLock lock(&mu);
      for (auto& [key, c] : clients) {
        if (c->attached || now - c->accepted_at <= std::chrono::milliseconds(ms)) continue;
        if (c->late.exchange(true)) continue;  // shut down already; its thread is leaving
        shutdown(c->socket.get(), SHUT_RDWR);
        late.push_back(c->creds);
      }
    }
    for (const Credentials& cr : late) {
      WarnLimited(cr.uid, StrCat("local client pid ", cr.pid, " uid ", cr.uid,
                                 " sent no hello within daemon.hello_timeout_ms (", ms,
                                 " ms); closing its connection"));
    }
  }

  void AcceptLoop() {
    while (!stopping) {
      pollfd p{listener.get(), POLLIN, 0};
      const int ready = poll(&p, 1, 200);
      CloseLateHellos();
      if (ready <= 0) continue;
      UniqueFd fd(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd.valid()) {
        if (stopping) return;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        spdlog::error("local socket accept: {}", ErrnoString(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      ucred cred{};
      socklen_t len = sizeof cred;
      if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        spdlog::warn("local client refused: SO_PEERCRED failed: {}", ErrnoString(errno));
        continue;
      }
      auto c = std::make_shared<LocalClient>();
      c->creds = {cred.pid, cred.uid, cred.gid, PeerGroups(fd.get())};
      // The thread is stored under mu: a client that closes at once (a
      // readiness probe) reaches Disconnect, which detaches c->thread under
      // mu, possibly before std::thread returns here. Unlocked, Disconnect
      // found no thread to detach and the last reference, dropped below,
      // destroyed a joinable std::thread: std::terminate.
      Status admit;
      {
        absl::MutexLock lock(&mu);
        admit = AdmitLocked(cred.uid);
        if (admit.ok()) {
          c->socket = std::move(fd);
          c->accepted_at = std::chrono::steady_clock::now();
          c->key = next_key++;
          clients[c->key] = c;
          admit = StartControlThreadLocked(c);
          if (!admit.ok()) fd = std::move(c->socket);
        }
      }
      // fd was moved only when a thread serves it.
      if (!admit.ok()) Refuse(std::move(fd), cred.uid, admit);  // NOLINT(bugprone-use-after-move)
    }
  }

  // Before hello a connection holds a thread but no session: it gets
  // daemon.hello_timeout_ms to send a small hello frame, or is closed.
  static constexpr uint32_t kMaxHelloBytes = 4096;
  static constexpr std::chrono::microseconds kEpollEvery{20};  // see RingLoop

  // Frames until the socket closes; then the session ends.
  void ServeControl(const std::shared_ptr<LocalClient>& c) {
    while (!stopping) {
      v1::LocalRequest req;
      std::vector<int> fds;
      const bool attached = !c->session.empty();
      Status s = wire::RecvFrame(c->socket.get(), &req, &fds,
                                 attached ? wire::kMaxFrameBytes : kMaxHelloBytes);
      c->passed = KeepPassedFds(s.ok() ? &req : nullptr, fds);
      if (!s.ok()) {
        if (!absl::IsUnavailable(s)) {
          WarnLimited(c->creds.uid, StrCat("local client pid ", c->creds.pid, " uid ", c->creds.uid,
                                           attached ? StrCat(" (session ", c->session_id, ")")
                                                    : " (before hello)",
                                           ": ", s.message(), "; closing its connection"));
        }
        break;
      }
      v1::LocalResponse resp;
      resp.set_tag(req.tag());
      std::vector<int> out_fds;
      Status r = HandleCaught(*c, req, &resp, &out_fds);
      resp.set_code(static_cast<int32_t>(r.code()));
      resp.set_message(std::string(r.message()));
      if (!r.ok()) out_fds.clear();
      const bool sent = wire::SendFrame(c->socket.get(), resp, out_fds).ok();
      c->sent_fds.clear();  // the kernel holds what it passed on
      if (!sent) break;
    }
    Disconnect(c);
  }

  // Handle, where a thread the node cannot start (a hop window's, a
  // redistribution's) is answered, never the end of the daemon.
  Status HandleCaught(LocalClient& c, const v1::LocalRequest& req, v1::LocalResponse* resp,
                      std::vector<int>* fds) {
    try {
      return Handle(c, req, resp, fds);
    } catch (const std::system_error& e) {
      NoteThreadRefused();
      WarnLimited(c.creds.uid, StrCat("local client pid ", c.creds.pid, " uid ", c.creds.uid,
                                      ": its request needed a thread the daemon cannot start (",
                                      e.what(), "); refused"));
      return ResourceExhausted("the daemon cannot start a thread for this request (", e.what(),
                               "): it is at its task limit");
    }
  }

  Status Handle(LocalClient& c, const v1::LocalRequest& req, v1::LocalResponse* resp,
                std::vector<int>* fds) {
    if (req.body_case() == v1::LocalRequest::kHello) {
      return Hello(c, req.hello(), resp->mutable_hello(), fds);
    }
    if (c.session.empty()) return FailedPrecondition("send hello first");
    const LocalSessionRefs refs{c.ref, c.cq_event.get(), &c.header->lease_epoch.value, &c.sent_fds,
                                &c.passed};
    return AnswerLocalRequest(node, refs, req, resp, fds);
  }

  Status Hello(LocalClient& c, const v1::HelloRequest& h, v1::HelloResponse* out,
               std::vector<int>* fds) {
    if (!c.session.empty()) return FailedPrecondition("hello was already sent");
    if (h.abi_version() != ring::kAbiVersion) {
      return FailedPrecondition("ring ABI version ", h.abi_version(), " is not supported (this ",
                                "daemon speaks ", ring::kAbiVersion, ")");
    }
    const DaemonConfig& dc = node.config().daemon;
    ISO_ASSIGN_OR_RETURN(
        c.control, SharedMemory::Create("isometry:control",
                                        ring::ControlBytes(dc.sq_entries, dc.cq_entries), false));
    c.sq_event.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    c.cq_event.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!c.sq_event.valid() || !c.cq_event.valid()) return Errno("eventfd");
    auto* hdr = new (c.control.data()) ring::ControlHeader{};
    hdr->magic = ring::kMagic;
    hdr->abi_version = ring::kAbiVersion;
    hdr->sq_entries = dc.sq_entries;
    hdr->cq_entries = dc.cq_entries;
    hdr->sq_offset = sizeof(ring::ControlHeader);
    hdr->cq_offset = hdr->sq_offset + uint64_t{dc.sq_entries} * sizeof(ring::SubmissionEntry);
    c.header = hdr;
    c.sq = {reinterpret_cast<ring::SubmissionEntry*>(c.control.data() + hdr->sq_offset),
            dc.sq_entries, &hdr->sq_head, &hdr->sq_tail};
    {
      absl::MutexLock lock(&c.cq_mu);
      c.cq = {reinterpret_cast<ring::CompletionEntry*>(c.control.data() + hdr->cq_offset),
              dc.cq_entries, &hdr->cq_head, &hdr->cq_tail};
    }
    // The daemon's own copies of the geometry (masks, entry counts) are
    // what it trusts; the header in shared memory informs the client only.
    ISO_ASSIGN_OR_RETURN(OpenedSession opened,
                         node.sessions().OpenSession(h.client_name(), c.creds, nullptr));
    c.session = opened.token;
    c.ref = opened.ref;
    c.session_id = opened.id;
    c.attached = true;  // no deadline from here on: the client may idle
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c.key;
    if (epoll_ctl(epoll.get(), EPOLL_CTL_ADD, c.sq_event.get(), &ev) != 0) {
      return Errno("epoll_ctl");
    }
    out->set_session(c.session);
    out->set_session_id(c.session_id);
    out->set_sq_entries(dc.sq_entries);
    out->set_cq_entries(dc.cq_entries);
    out->set_control_bytes(c.control.size());
    fds->push_back(c.control.fd());
    fds->push_back(c.sq_event.get());
    fds->push_back(c.cq_event.get());
    return OkStatus();
  }

  void Disconnect(const std::shared_ptr<LocalClient>& c) {
    c->closed = true;
    if (c->sq_event.valid()) epoll_ctl(epoll.get(), EPOLL_CTL_DEL, c->sq_event.get(), nullptr);
    if (c->ref.has_value()) node.sessions().CloseSession(c->ref);
    absl::MutexLock lock(&mu);
    // The thread cannot join itself: detach it; shared_ptr keeps the state.
    if (c->thread.joinable()) c->thread.detach();
    clients.erase(c->key);
  }

  // ---- rings ----

  // After a request the ring thread polls every ring for ring_poll_us (clients
  // see daemon_awake = 1, skip the eventfd): no syscalls, no wakeup.
  void RingLoop() {
    const auto poll_window = std::chrono::microseconds(node.config().daemon.ring_poll_us);
    epoll_event events[64];
    std::vector<std::shared_ptr<LocalClient>> awake;  // rings marked awake
    auto last_work = std::chrono::steady_clock::now() - poll_window;
    auto last_epoll = last_work;
    SpinWait spin;  // restarted by work: it yields after 10 us with nothing served
    // Work is timed by the next turn's clock read, not a read of its own:
    // one clock read a copy fewer.
    bool did_work = false;
    auto worked = [&] { did_work = true; };
    while (!stopping) {
      const auto now = std::chrono::steady_clock::now();
      if (did_work) {
        spin.Restart(last_work = now);
        did_work = false;
      }
      // Not while the copy threads hold every CPU: polling would take
      // one from them (core/cpu_claims.h).
      const bool polling = now - last_work < poll_window && !EveryCpuClaimed();
      if (!polling && !awake.empty()) {
        // Going to sleep: clear the flags, then look once more (the other
        // half of the seq_cst handshake with the clients).
        for (auto& c : awake) c->header->daemon_awake.value.store(0, std::memory_order_seq_cst);
        // Pairs with the client's fence after it consumes completions
        // (client_impl.h, Reap): CQ room it made while it still saw the
        // flag set is seen by the drain below.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        bool pending = false;
        for (auto& c : awake) pending |= Drain(c, false) > 0;
        awake.clear();
        if (pending) worked();
        continue;
      }
      // Polling reads the awake rings (below) between pauses (spin_wait.h);
      // epoll only every kEpollEvery: a system call costs a microsecond or
      // more on a paravirtualized guest (core/spin_wait.h).
      const bool look = !polling || now - last_epoll >= kEpollEvery;
      if (!look) spin.Step();
      const int n = look ? epoll_wait(epoll.get(), events, 64, polling ? 0 : -1) : 0;
      if (look) last_epoll = std::chrono::steady_clock::now();
      if (n < 0 && errno != EINTR) {
        spdlog::error("ring epoll: {}", ErrnoString(errno));
        return;
      }
      for (int i = 0; i < std::max(n, 0); ++i) {
        // A copy: epoll_event is packed, and find() would bind a reference
        // to its misaligned member.
        const uint64_t key = events[i].data.u64;
        if (key == 0) return;  // wake: stopping
        std::shared_ptr<LocalClient> c;
        {
          absl::MutexLock lock(&mu);
          auto it = clients.find(key);
          if (it != clients.end()) c = it->second;
        }
        if (!c || c->closed) continue;
        if (Drain(c, true) > 0) {
          worked();
          if (std::find(awake.begin(), awake.end(), c) == awake.end()) {
            c->header->daemon_awake.value.store(1, std::memory_order_seq_cst);
            awake.push_back(c);
          }
        }
      }
      for (auto& c : awake) {
        if (!c->closed && Drain(c, false) > 0) worked();
      }
    }
  }

  // Serves what the client submitted; returns how many entries were taken.
  int Drain(const std::shared_ptr<LocalClient>& c, bool from_event) {
    if (from_event) {
      uint64_t count;
      (void)!::read(c->sq_event.get(), &count, sizeof count);
    }
    int taken = 0;
    const uint32_t cq_entries = node.config().daemon.cq_entries;
    while (true) {
      const uint32_t tail = c->sq.tail(std::memory_order_seq_cst);
      const std::optional<uint32_t> ready = c->sq.Ready(tail);
      if (ready == 0u) break;
      // A tail more than a ring ahead is a client bug or attack: resync
      // to it rather than reading stale slots forever.
      if (!ready) {
        const uint32_t head = c->sq.head();
        WarnLimited(c->creds.uid,
                    StrCat("session ", c->session_id, ": submission tail ", tail, " runs ",
                           tail - head, " entries ahead of head ", head, "; skipping"));
        c->sq.SkipTo(tail);
        break;
      }
      // CQ full: the client kicks the SQ eventfd after consuming completions.
      if (!c->CompletionSlotFree(cq_entries)) break;
      // Copied out once; SubmitCaught validates the copy (no double fetch).
      const ring::SubmissionEntry e = c->sq.Take();
      c->sq.Publish();
      ++c->accepted;
      ++taken;
      SubmitCaught(c, e);
    }
    c->sq.Publish();
    return taken;
  }

  // Submit, where a thread the node cannot start fails that copy only.
  void SubmitCaught(const std::shared_ptr<LocalClient>& c, const ring::SubmissionEntry& e) {
    try {
      Submit(c, e);
    } catch (const std::system_error& ex) {
      NoteThreadRefused();
      c->Complete(e.user_data, 0,
                  ResourceExhausted("the daemon cannot start a thread for this copy (", ex.what(),
                                    "): it is at its task limit"));
    }
  }

  void Submit(const std::shared_ptr<LocalClient>& c, const ring::SubmissionEntry& e) {
    const Result<ring::ValidSubmission> v = ring::ValidateSubmission(e);
    if (!v.ok()) return c->Complete(e.user_data, 0, v.status());
    switch (v->op) {
      case ring::Op::kNop:
        return c->Complete(e.user_data, 0, OkStatus());
      case ring::Op::kCancel:
        return c->Complete(e.user_data, v->transfer, node.copies().Cancel(c->ref, v->transfer));
      case ring::Op::kCopy: {
        CopySpec spec;
        spec.src_instance = v->src_instance;
        spec.dst_instance = v->dst_instance;
        spec.options = {.priority = v->priority, .durable = v->durable};
        spec.client_runs_hops = v->client_runs_hops;
        const uint64_t user_data = e.user_data;
        std::weak_ptr<LocalClient> weak = c;
        auto gate = v->report_accepted ? std::make_shared<AcceptedGate>() : nullptr;
        // Its answer is a post to the client's completion ring: an inline
        // copy's goes out before the node's bookkeeping of it.
        auto t = node.copies().CopyAnsweredEarly(
            c->ref, spec, [weak, user_data, gate](const TransferReport& r) {
              auto client = weak.lock();
              if (client && !(gate && gate->Hold(r.id, r.status))) {
                client->Complete(user_data, r.id, r.status);
              }
            });
        if (!t.ok()) return c->Complete(user_data, 0, t.status());
        if (!gate) return;
        // The interim completion takes a slot of its own, where one is free.
        if (c->CompletionSlotFree(node.config().daemon.cq_entries)) {
          ++c->accepted;
          c->CompleteAccepted(user_data, *t);
        }
        if (std::optional<AcceptedGate::Held> held = gate->Open()) {
          c->Complete(user_data, held->transfer, held->status);
        }
        return;
      }
    }
  }
};

namespace {
constexpr std::chrono::seconds kThreadsLeaveWithin{5};
}  // namespace

LocalServer::LocalServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<LocalServer>> LocalServer::Start(Node& node) {
  auto impl = std::make_unique<Impl>(node);
  const DaemonConfig& dc = node.config().daemon;
  impl->path = dc.local_socket;
  impl->thread_cap = dc.max_connection_threads;
  if (const std::optional<TaskHeadroom> h = ReadTaskHeadroom()) {
    if (const uint64_t fits = ConnectionThreadsFitting(h->free); fits < impl->thread_cap) {
      impl->thread_cap = fits;
      impl->thread_cap_why = StrCat(", lowered to ", fits, " to fit the task limit (", h->source,
                                    " ", h->limit, ", ", h->free, " free at start)");
      spdlog::warn(
          "local socket: at most {} connection threads: daemon.max_connection_threads "
          "({}) does not fit the task limit ({} {}, {} free at start; systemd TasksMax=)",
          fits, dc.max_connection_threads, h->source, h->limit, h->free);
    }
  }
  ISO_ASSIGN_OR_RETURN(int fd, ListenUnix(dc.local_socket, dc.socket_mode, dc.socket_group));
  impl->listener.reset(fd);
  impl->epoll.reset(epoll_create1(EPOLL_CLOEXEC));
  impl->wake.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->epoll.valid() || !impl->wake.valid()) return Errno("epoll/eventfd");
  epoll_event ev{};  // key 0 (data.u64): the wake eventfd
  ev.events = EPOLLIN;
  epoll_ctl(impl->epoll.get(), EPOLL_CTL_ADD, impl->wake.get(), &ev);
  Impl* p = impl.get();
  try {
    impl->ring_thread = std::thread([p] {
      NameThisThread("iso-ring");
      RequestShortSlice();
      p->RingLoop();
    });
    impl->accept_thread = std::thread([p] {
      NameThisThread("iso-accept");
      p->AcceptLoop();
    });
  } catch (const std::system_error& e) {
    p->stopping = true;
    const uint64_t one = 1;
    (void)!::write(p->wake.get(), &one, sizeof one);
    if (p->ring_thread.joinable()) p->ring_thread.join();
    return ResourceExhausted("cannot start the local socket's threads: ", e.what());
  }
  spdlog::info("local shared-memory socket on {} (mode {:o}{})", dc.local_socket, dc.socket_mode,
               dc.socket_group.empty() ? "" : ", group " + dc.socket_group);
  return std::unique_ptr<LocalServer>(new LocalServer(std::move(impl)));
}

LocalServer::~LocalServer() {
  impl_->stopping = true;
  shutdown(impl_->listener.get(), SHUT_RDWR);
  const uint64_t one = 1;
  (void)!::write(impl_->wake.get(), &one, sizeof one);
  impl_->accept_thread.join();
  impl_->ring_thread.join();
  std::vector<std::shared_ptr<LocalClient>> clients;
  {
    absl::MutexLock lock(&impl_->mu);
    for (auto& [k, c] : impl_->clients) clients.push_back(c);
  }
  // Unblock every control thread; each ends its session and leaves.
  for (auto& c : clients) shutdown(c->socket.get(), SHUT_RDWR);
  clients.clear();
  ::unlink(impl_->path.c_str());
  // A thread still in a request (the node's call) leaves once it returns.
  const auto deadline = std::chrono::steady_clock::now() + kThreadsLeaveWithin;
  while (impl_->live_threads.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (const uint32_t left = impl_->live_threads.load(); left > 0) {
    // They still use the state: it is left to the exit rather than freed
    // under them.
    spdlog::error("{} local connection thread(s) still in a request after {} s; leaving them", left,
                  kThreadsLeaveWithin.count());
    (void)impl_.release();
  }
}

}  // namespace isometry
