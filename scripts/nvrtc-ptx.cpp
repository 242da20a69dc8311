// Compiles one generated kernel source the way jit/compiler.cpp does (NVRTC,
// the same options) and writes its PTX and cubin, so that a restructuring of
// the templates can be checked to leave the machine code alone
// (scripts/ptx-identity.sh). The headers come from -I TEMPLATE_DIR instead of
// the embedded copies: the text is the same.
// Usage: nvrtc-ptx ARCH TEMPLATE_DIR SOURCE.cu OUT.ptx OUT.cubin
#include <nvrtc.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool Check(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return true;
  std::cerr << "nvrtc-ptx: " << what << ": " << nvrtcGetErrorString(r) << "\n";
  return false;
}

bool WriteFile(const std::string& path, const std::vector<char>& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: nvrtc-ptx ARCH TEMPLATE_DIR SOURCE.cu OUT.ptx OUT.cubin\n";
    return 2;
  }
  std::ifstream in(argv[3], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  nvrtcProgram prog;
  // A fixed program name: the file name is not part of what is compared.
  if (!Check(nvrtcCreateProgram(&prog, text.c_str(), "kernel.cu", 0, nullptr, nullptr), "create")) return 1;
  const std::string arch = std::string("-arch=") + argv[1];
  const std::string inc = std::string("-I") + argv[2];
  // jit/compiler.cpp's options (-Xptxas=-v only adds to the log).
  const char* opts[] = {arch.c_str(), "-std=c++17", "-Xptxas=-v", "-default-device", inc.c_str()};
  const nvrtcResult cr = nvrtcCompileProgram(prog, 5, opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  if (log_size > 1) {
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    // ptxas's -v lines are info; a warning is worth seeing even on success.
    if (cr != NVRTC_SUCCESS || log.find("warning") != std::string::npos) std::cerr << argv[3] << ":\n" << log << "\n";
  }
  if (!Check(cr, argv[3])) return 1;
  size_t n = 0;
  if (!Check(nvrtcGetPTXSize(prog, &n), "ptx size")) return 1;
  std::vector<char> ptx(n);
  if (!Check(nvrtcGetPTX(prog, ptx.data()), "ptx")) return 1;
  if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  if (!Check(nvrtcGetCUBINSize(prog, &n), "cubin size")) return 1;
  std::vector<char> cubin(n);
  if (!Check(nvrtcGetCUBIN(prog, cubin.data()), "cubin")) return 1;
  nvrtcDestroyProgram(&prog);
  return WriteFile(argv[4], ptx) && WriteFile(argv[5], cubin) ? 0 : 1;
}
