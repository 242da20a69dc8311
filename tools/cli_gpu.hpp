// What the GPU subcommands (devices, tune, verify) share.
#pragma once

#include <string>

#include "topk/status.hpp"

namespace topk::cli {

inline constexpr const char* kNoGpuHint =
    "tune, verify and devices need an NVIDIA GPU with its driver; space, emit, show, report, export, import and "
    "merge work without one.";

// The GPUs of this machine, or the exit code of the message printed.
StatusOr<int> RequireGpus(const std::string& command);

}  // namespace topk::cli
