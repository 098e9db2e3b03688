#include "tools/bench/peer_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <thread>

extern char** environ;

namespace isometry::bench {

namespace {

using namespace std::chrono_literals;

// Time a launcher gets after SIGTERM to stop its ranks before SIGKILL.
constexpr auto kTermGrace = 3s;

// Our environment with `overrides` ("NAME=value") replacing same-named entries.
std::vector<std::string> ChildEnv(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const bool replaced =
        std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
          return entry.substr(0, entry.find('=') + 1) ==
                 std::string_view(o).substr(0, o.find('=') + 1);
        });
    if (!replaced) {
      env.emplace_back(entry);
    }
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) {
    pointers.push_back(s.data());
  }
  pointers.push_back(nullptr);
  return pointers;
}

// Appends what can be read now; false once the pipe is at end of file.
bool Drain(int fd, std::string* out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && errno == EAGAIN;
    }
  }
}

// SIGTERM first: mpirun and mpiexec then stop their ranks, which run in
// process groups of their own; SIGKILL if the launcher does not exit.
void Terminate(pid_t pid) {
  kill(-pid, SIGTERM);
  const auto give_up = PeerClock::now() + kTermGrace;
  while (!Exited(pid) && PeerClock::now() < give_up) {
    std::this_thread::sleep_for(10ms);
  }
  kill(-pid, SIGKILL);
}

}  // namespace

std::string Describe(const Command& c) {
  std::string s;
  for (const std::string& part : c.env) {
    s += part + " ";
  }
  for (const std::string& part : c.argv) {
    s += part + " ";
  }
  s.pop_back();  // argv is never empty
  return s;
}

// The end of a tool's output on one line, for `detail`.
std::string Tail(const std::string& output) {
  constexpr size_t kKeep = 400;
  std::string tail = output.substr(output.size() - std::min(output.size(), kKeep));
  while (!tail.empty() && std::isspace(static_cast<unsigned char>(tail.back()))) {
    tail.pop_back();
  }
  std::replace(tail.begin(), tail.end(), '\n', ' ');
  return tail;
}

std::optional<std::string> FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const size_t colon = std::min(dirs.find(':'), dirs.size());
    const std::string candidate = std::string(dirs.substr(0, colon)) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    dirs.remove_prefix(std::min(colon + 1, dirs.size()));
  }
  return std::nullopt;
}

// Starts `c` in a process group of its own, so that a timeout can signal the
// launcher and its helpers together; stdin is /dev/null because mpirun would
// otherwise forward ours to rank 0. posix_spawn rather than fork: the caller
// may have threads, and it reports exec failures as its return value.
std::optional<Child> Spawn(const Command& c, std::string* error) {
  const std::optional<std::string> path = FindInPath(c.argv[0]);
  if (!path) {
    *error = c.argv[0] + " not found in PATH";
    return std::nullopt;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = "pipe: " + std::error_code(errno, std::generic_category()).message();
    return std::nullopt;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<std::string> args = c.argv, env = ChildEnv(c.env);
  const std::vector<char*> argv = Pointers(args), envp = Pointers(env);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path->c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    *error =
        "cannot start " + *path + ": " + std::error_code(rc, std::generic_category()).message();
    return std::nullopt;
  }
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return Child{pid, fds[0]};
}

// True once the child has exited. It stays a zombie (WNOWAIT) until Finish
// reaps it, so its pid, which names its process group, cannot be reused
// while we may still signal that group.
bool Exited(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return true;
  }
  return info.si_pid == pid;
}

// Collects the child's output until it exits, or terminates it at `deadline`,
// and reaps it. Stops at the leader's exit rather than at end of file, as
// helpers the leader leaves behind may hold the pipe open.
Outcome Finish(const Child& child, PeerClock::time_point deadline) {
  Outcome out;
  bool open = true;
  while (!Exited(child.pid)) {
    if (PeerClock::now() >= deadline) {
      out.timed_out = true;
      Terminate(child.pid);
      break;
    }
    if (open) {
      pollfd p{child.fd, POLLIN, 0};
      poll(&p, 1, 20);
      open = Drain(child.fd, &out.output);
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  Drain(child.fd, &out.output);
  close(child.fd);
  waitpid(child.pid, &out.status, 0);
  return out;
}

// Runs `c` to its end or to `deadline`; nullopt (and `error`) if it could not
// start.
std::optional<Outcome> Run(const Command& c, PeerClock::time_point deadline, std::string* error) {
  const std::optional<Child> child = Spawn(c, error);
  if (!child) {
    return std::nullopt;
  }
  return Finish(*child, deadline);
}

// Why a finished run failed, with the end of its output; empty on success.
std::string FailureOf(const Outcome& o) {
  std::string why;
  if (o.timed_out) {
    why = "timed out after " + std::to_string(kPeerTimeout.count()) + " s";
  } else if (WIFSIGNALED(o.status)) {
    why = "killed by signal " + std::to_string(WTERMSIG(o.status));
  } else if (WEXITSTATUS(o.status) != 0) {
    why = "exit status " + std::to_string(WEXITSTATUS(o.status));
  } else {
    return "";
  }
  return why + ": " + Tail(o.output);
}

}  // namespace isometry::bench
