// topk-tune-worker: runs candidates for the tuner in a separate process (see
// tuner/worker.hpp). Reads JSON requests on stdin, answers on stdout; exits
// non-zero after a sticky CUDA error so that the tuner starts a fresh one.
#include <cstdlib>
#include <iostream>
#include <string>

#include "tuner/worker.hpp"

int main(int argc, char** argv) {
  int device = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: topk-tune-worker [--device N]  (started by topk-tune; speaks JSON lines)\n";
      return 2;
    }
  }
  std::ios::sync_with_stdio(false);
  return topk::tuner::ServeWorker(device, std::cin, std::cout);
}
