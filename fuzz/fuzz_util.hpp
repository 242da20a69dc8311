// Shared by the fuzz targets: a private temporary directory for files.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace topk::fuzz {

// A directory made once per process under $TMPDIR, else /dev/shm (SQLite's
// fsyncs cost nothing on tmpfs: many more executions per second), else
// /tmp; removed at exit.
inline const std::filesystem::path& TempDir() {
  static const std::filesystem::path dir = [] {
    const char* env = std::getenv("TMPDIR");
    std::string base = env && *env ? env : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/topk-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(TempDir(), ec);
    });
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

inline void WriteBytes(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) std::abort();
}

// Removes an SQLite file and the -wal / -shm / -journal files beside it.
inline void RemoveDb(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

}  // namespace topk::fuzz
