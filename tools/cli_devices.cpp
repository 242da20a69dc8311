// `topk-tune devices`: the GPUs of this machine and their fingerprints.
#include <array>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "jit/device.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_gpu.hpp"

namespace topk::cli {

using nlohmann::json;

namespace {

std::string Driver(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// Clusters of 2, 4, 8 and 16 CTAs (one an SM) that run at once, "-" where
// the GPU has no clusters or the probe could not run.
std::string Clusters(const std::array<int, 5>& n) {
  if (n[1] < 0) return "-";
  return std::to_string(n[1]) + "/" + std::to_string(n[2]) + "/" + std::to_string(n[3]) + "/" + std::to_string(n[4]);
}

}  // namespace

Command AddDevices(CLI::App& root) {
  CLI::App* app = root.add_subcommand("devices", "List the GPUs of this machine and their tuning fingerprints");
  app->footer("Example: topk-tune devices\nNeeds the NVIDIA driver; exits with code 3 when there is no GPU.");
  auto run = []() -> int {
    auto n = RequireGpus("devices");
    if (!n.ok()) return Fail(kExitNoGpu, n.status().message(), kNoGpuHint);
    json list = json::array();
    Table t({"#", "name", "cc", "SMs", "clusters 2/4/8/16", "L2", "memory", "driver", "compiler", "fingerprint"});
    for (int i = 0; i < *n; ++i) {
      auto d = jit::QueryDevice(i);
      if (!d.ok()) return Fail(kExitError, "cannot query GPU " + std::to_string(i) + ": " + d.status().ToString());
      list.push_back(d->ToJson());
      t.Add({std::to_string(i), d->name, std::to_string(d->cc_major) + "." + std::to_string(d->cc_minor),
             std::to_string(d->sm_count), Clusters(d->resident_clusters), FormatBytes(d->l2_bytes),
             FormatBytes(d->total_mem),
             Driver(d->driver_version), d->compiler_version, d->Fingerprint()});
    }
    if (Global().json) {
      return JsonResult({{"devices", std::move(list)}});
    } else {
      t.Print(std::cout);
      for (const auto& d : list)
        if (!d["cluster_query_error"].get<std::string>().empty())
          std::cout << "\nGPU " << d["ordinal"].get<int>() << ": the cluster count could not be asked ("
                    << d["cluster_query_error"].get<std::string>() << "); the defaults estimate it from the SMs.\n";
      std::cout << "\nTuning results are shared between GPUs with the same fingerprint.\n";
    }
    return kExitOk;
  };
  return {app, run};
}

}  // namespace topk::cli
