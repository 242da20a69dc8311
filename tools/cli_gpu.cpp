// What the GPU subcommands share; each command has its file: cli_devices.cpp,
// cli_tune.cpp and cli_verify.cpp.
#include "tools/cli_gpu.hpp"

#include "jit/device.hpp"

namespace topk::cli {

StatusOr<int> RequireGpus(const std::string& command) {
  auto n = jit::DeviceCount();
  if (!n.ok())
    return Status(Code::kUnavailable, command,
                  command + " needs an NVIDIA GPU and none is usable here: " + n.status().message());
  if (*n < 1)
    return Status(Code::kUnavailable, command, command + " needs an NVIDIA GPU, but the CUDA driver reports none");
  return *n;
}

}  // namespace topk::cli
