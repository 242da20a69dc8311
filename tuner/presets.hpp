// Problem sets to tune: the built-in presets and shapes from a JSON file.
#pragma once

#include <string>
#include <vector>

#include "topk/status.hpp"
#include "topk/topk.hpp"

namespace topk::tuner {

struct ShapeSet {
  std::string name;
  std::vector<Problem> problems;
  std::string dist = "normal";     // benchmark input distribution
  std::string l2_mode = "rotate";  // "hot" where the producer leaves data in L2
};

// "dsa" (DeepSeek-V3.2 indexer: fp32, per-row ranges, k 512..2048, n 4K..512K,
// batch 1..128, hot L2), "sampling" (fp32 and bf16 logits, vocab 32K..256K,
// k 1..1024, batch 1..256, values out), "moe" (n 64..512, k 1..8, batch
// 1..16K), "smoke" (three small shapes for a quick check).
StatusOr<ShapeSet> Preset(const std::string& name);
std::vector<std::string> PresetNames();

// A JSON file: {"name": ..., "dist": ..., "l2_mode": ..., "shapes": [{"dtype":
// "f32", "batch": 64, "n": 32768, "k": 2048, "largest": true, "ranges": true,
// "values": false, "sorted": false}, ...]} or just the array of shapes.
// Errors name the file, the shape index and the field (or the unknown
// top-level key). The file must be a regular file of at most
// kMaxShapeFileBytes; a missing one is kNotFound.
constexpr int64_t kMaxShapeFileBytes = int64_t{1} << 20;
StatusOr<ShapeSet> ShapesFromJsonFile(const std::string& path);
StatusOr<ShapeSet> ShapesFromJsonText(const std::string& text, const std::string& origin);

// Limits a tuned shape must respect (beyond Problem::Validate): k >= 1,
// batch >= 1, batch * n below 2^31 elements, k <= jit::kMaxSortedK when
// sorted.
Status ValidateTunable(const Problem& p);

}  // namespace topk::tuner
