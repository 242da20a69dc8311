#include "tools/atomic_file.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace topk::cli {

namespace fs = std::filesystem;

namespace {

Status Unavailable(const std::string& msg) { return Status(Code::kUnavailable, "WriteFileAtomically", msg); }

// fsync by name (the stream does not expose its descriptor); Linux syncs a
// file's data through a read-only descriptor too.
bool SyncPath(const std::string& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

Status WriteFileAtomically(const std::string& path, const std::function<Status(std::ostream&)>& fill) {
  if (path.empty()) return InvalidArgument("WriteFileAtomically", "empty output path");
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // A hidden, unique name in the target's directory: rename(2) replaces a
  // file atomically only within one file system.
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    const int err = errno;
    return Unavailable("cannot write '" + path + "': cannot create a file in '" + dir.string() +
                       "': " + std::strerror(err));
  }
  // mkstemp makes the file 0600. Keep the mode of the file being replaced,
  // or give a new one what open(2) would (0666 less the umask).
  struct stat old {};
  mode_t mode = 0;
  if (::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode)) {
    mode = old.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  ::fchmod(fd, mode);
  ::close(fd);

  Status s = [&]() -> Status {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Unavailable("cannot write '" + path + "': cannot open '" + tmp + "'");
    TOPK_RETURN_IF_ERROR(fill(out));
    out.close();
    if (!out) return Unavailable("cannot write '" + path + "': writing '" + tmp + "' failed (disk full?)");
    if (!SyncPath(tmp, O_RDONLY)) {
      const int err = errno;
      return Unavailable("cannot write '" + path + "': flushing '" + tmp + "' failed: " + std::strerror(err));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      return Unavailable("cannot write '" + path + "': cannot rename '" + tmp + "' to it: " + std::strerror(err));
    }
    // The rename itself is durable once the directory is synced (best
    // effort: some file systems refuse fsync on a directory).
    SyncPath(dir.string(), O_RDONLY | O_DIRECTORY);
    return Status::Ok();
  }();
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  return WriteFileAtomically(path, [&](std::ostream& out) -> Status {
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    return Status::Ok();
  });
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (a.empty() || b.empty() || ::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace topk::cli
