// Writing the files the CLI produces (export, report, emit -o, verify's
// cubins) so that a failed or interrupted write never leaves a truncated
// file: the bytes go to a temporary beside the target, are flushed to disk,
// and the temporary is renamed over the target. A reader sees the old file
// or the new one, never half of either. Also: whether two paths name the
// same file, so that an output never replaces the tuning cache itself.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

#include "topk/status.hpp"

namespace topk::cli {

// Writes `path` through a temporary in the same directory (created with the
// permissions a new file gets from the umask) and a rename. `fill` writes
// the contents; a Status it returns, a stream error or a failed flush,
// fsync or rename removes the temporary and leaves any old `path` as it
// was. The directory must exist. Errors are kUnavailable naming the path.
Status WriteFileAtomically(const std::string& path, const std::function<Status(std::ostream&)>& fill);
// The same for contents already in memory.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Whether `a` and `b` name the same existing file: the same device and
// inode after following symbolic links, so a hard link, a symbolic link or
// another spelling of the path all count. False when either is missing.
bool SameFile(const std::string& a, const std::string& b);

}  // namespace topk::cli
