#include "tuner/presets.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "topk/args.h"
#include "tuner/reference.hpp"

namespace topk::tuner {

namespace {

Problem P(DType dt, int64_t batch, int64_t n, int64_t k, bool ranges, bool values) {
  Problem p;
  p.dtype = dt;
  p.batch = batch;
  p.n = n;
  p.k = k;
  p.ranges = ranges;
  p.values = values;
  return p;
}

}  // namespace

std::vector<std::string> PresetNames() { return {"dsa", "sampling", "moe", "smoke"}; }

Status ValidateTunable(const Problem& p) {
  TOPK_RETURN_IF_ERROR(p.Validate());
  if (p.k < 1) return InvalidArgument("shape", "k must be >= 1 to tune, got " + std::to_string(p.k));
  if (p.batch < 1) return InvalidArgument("shape", "batch must be >= 1 to tune, got " + std::to_string(p.batch));
  if (p.deterministic)
    return InvalidArgument("shape",
                           "'deterministic' is not tuned: it runs on whichever kernel wins the shape without "
                           "it (the resident kernels and a grid winner's `ties` 1 kernel take the ties "
                           "themselves, a tie pass follows the others); tune "
                           "the shape without the flag, and `topk-tune verify --deterministic` checks and "
                           "times the winners with it");
  // The runtime refuses these, so a winner for one could never be used.
  if (p.sorted && p.k > TOPK_MAX_SORTED_K)
    return InvalidArgument("shape", "sorted output supports k <= " + std::to_string(TOPK_MAX_SORTED_K) + ", got k = " +
                                        std::to_string(p.k));
  // Divide rather than multiply: a row stride read from the grammar may be
  // near INT64_MAX, and the product would overflow.
  constexpr int64_t kMaxElems = (1LL << 31) - 1;
  if (p.stride() > kMaxElems / p.batch)
    return InvalidArgument("shape", "batch * row stride = " + std::to_string(p.batch) + " * " +
                                        std::to_string(p.stride()) + " elements: at most 2^31 - 1 can be tuned");
  return Status::Ok();
}

StatusOr<ShapeSet> Preset(const std::string& name) {
  ShapeSet s;
  s.name = name;
  const DType f32 = DType::kF32, bf16 = DType::kBF16;
  if (name == "dsa") {
    // The indexer selects 512..2048 keys of the query's visible prefix
    // ([start, end) per row); its scores were just written, so L2 is hot.
    s.l2_mode = "hot";
    for (auto [b, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {64, 4096, 512},    {64, 4096, 128},     {1, 8192, 2048},    {64, 16384, 2048},
             {1, 32768, 2048},   {64, 32768, 2048},   {64, 32768, 1024},  {64, 32768, 512},
             {128, 32768, 2048}, {1, 65536, 2048},    {8, 65536, 2048},   {64, 65536, 2048},
             {1, 131072, 2048},  {1, 131072, 1024},   {1, 131072, 512},   {4, 131072, 2048},
             {32, 131072, 2048}, {128, 131072, 2048}, {128, 131072, 1024}, {4, 164000, 2048},
             {1, 262144, 2048},  {16, 262144, 2048},  {1, 524288, 2048},  {8, 524288, 2048}})
      s.problems.push_back(P(f32, b, n, k, true, false));
  } else if (name == "sampling") {
    s.dist = "logits";
    for (auto [dt, b, n, k] : std::vector<std::tuple<DType, int64_t, int64_t, int64_t>>{
             {f32, 1, 32000, 50},     {f32, 64, 32000, 50},    {f32, 1, 128256, 1},    {f32, 64, 128256, 50},
             {f32, 256, 128256, 1024}, {f32, 32, 151936, 64},  {f32, 128, 201088, 64}, {f32, 16, 256000, 1024},
             {bf16, 1, 32000, 50},    {bf16, 64, 151936, 50},  {bf16, 128, 201088, 64}, {bf16, 256, 128256, 1024},
             {bf16, 8, 256000, 1},    {bf16, 32, 128256, 512}})
      s.problems.push_back(P(dt, b, n, k, false, true));
  } else if (name == "moe") {
    for (auto [dt, b, n, k] : std::vector<std::tuple<DType, int64_t, int64_t, int64_t>>{
             {f32, 1, 256, 8},     {f32, 64, 256, 8},    {f32, 1024, 256, 8},  {f32, 4096, 256, 8},
             {f32, 16384, 256, 8}, {f32, 4096, 64, 2},   {f32, 4096, 128, 4},  {f32, 4096, 512, 8},
             {f32, 4096, 256, 1},  {bf16, 4096, 256, 8}, {bf16, 16384, 256, 8}, {bf16, 1024, 128, 2}})
      s.problems.push_back(P(dt, b, n, k, false, false));
  } else if (name == "smoke") {
    s.problems = {P(f32, 8, 8192, 256, true, false), P(bf16, 16, 32000, 50, false, true),
                  P(f32, 256, 256, 8, false, false)};
  } else {
    return InvalidArgument("preset", "unknown preset '" + name + "' (dsa, sampling, moe, smoke)");
  }
  return s;
}

StatusOr<ShapeSet> ShapesFromJsonText(const std::string& text, const std::string& origin) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return InvalidArgument(origin, "not valid JSON");
  ShapeSet s;
  s.name = origin;
  const nlohmann::json* shapes = &j;
  if (j.is_object()) {
    // A misspelt key ("l2mode") would otherwise change nothing, silently.
    static const std::vector<std::string> top = {"name", "shapes", "dist", "l2_mode"};
    for (auto it = j.begin(); it != j.end(); ++it)
      if (std::find(top.begin(), top.end(), it.key()) == top.end())
        return InvalidArgument(origin, "unknown key \"" + it.key().substr(0, 64) +
                                           "\" (allowed: name, shapes, dist, l2_mode)");
    if (!j.contains("shapes")) return InvalidArgument(origin, "expected an array of shapes or an object with \"shapes\"");
    shapes = &j["shapes"];
    if (j.contains("name") && j["name"].is_string()) s.name = j["name"].get<std::string>();
    if (j.contains("dist")) {
      if (!j["dist"].is_string()) return InvalidArgument(origin, "\"dist\" must be a string");
      s.dist = j["dist"].get<std::string>();
      if (auto d = ParseDist(s.dist); !d.ok()) return InvalidArgument(origin, "\"dist\": " + d.status().message());
    }
    if (j.contains("l2_mode")) {
      if (!j["l2_mode"].is_string()) return InvalidArgument(origin, "\"l2_mode\" must be a string");
      s.l2_mode = j["l2_mode"].get<std::string>();
      if (s.l2_mode != "hot" && s.l2_mode != "rotate")
        return InvalidArgument(origin, "\"l2_mode\" must be \"hot\" or \"rotate\"");
    }
  }
  if (!shapes->is_array()) return InvalidArgument(origin, "\"shapes\" must be an array");
  if (shapes->empty()) return InvalidArgument(origin, "no shapes");
  static const std::vector<std::string> known = {"dtype", "batch", "n", "k", "row_stride",
                                                 "largest", "ranges", "values", "sorted"};
  for (size_t i = 0; i < shapes->size(); ++i) {
    const nlohmann::json& e = (*shapes)[i];
    const std::string where = origin + ": shape " + std::to_string(i);
    if (!e.is_object()) return InvalidArgument(where, "expected an object");
    for (auto it = e.begin(); it != e.end(); ++it)
      if (std::find(known.begin(), known.end(), it.key()) == known.end())
        return InvalidArgument(where, "unknown field \"" + it.key() + "\"");
    Problem p;
    for (const char* f : {"batch", "n", "k"})
      if (!e.contains(f) || !e[f].is_number_integer())
        return InvalidArgument(where, std::string("field \"") + f + "\" must be an integer");
    if (e.contains("dtype")) {
      if (!e["dtype"].is_string()) return InvalidArgument(where, "field \"dtype\" must be a string");
      auto dt = ParseDType(e["dtype"].get<std::string>());
      if (!dt.ok()) return InvalidArgument(where, dt.status().message());
      p.dtype = *dt;
    }
    p.batch = e["batch"].get<int64_t>();
    p.n = e["n"].get<int64_t>();
    p.k = e["k"].get<int64_t>();
    if (e.contains("row_stride")) {
      if (!e["row_stride"].is_number_integer()) return InvalidArgument(where, "field \"row_stride\" must be an integer");
      p.row_stride = e["row_stride"].get<int64_t>();
    }
    for (auto [f, dst] : std::vector<std::pair<const char*, bool*>>{
             {"largest", &p.largest}, {"ranges", &p.ranges}, {"values", &p.values}, {"sorted", &p.sorted}}) {
      if (!e.contains(f)) continue;
      if (!e[f].is_boolean()) return InvalidArgument(where, std::string("field \"") + f + "\" must be true or false");
      *dst = e[f].get<bool>();
    }
    Status v = ValidateTunable(p);
    if (!v.ok()) return InvalidArgument(where, v.message());
    s.problems.push_back(p);
  }
  return s;
}

StatusOr<ShapeSet> ShapesFromJsonFile(const std::string& path) {
  // A regular file of bounded size: /dev/zero or a FIFO would be read
  // forever, a huge file into memory.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status(Code::kNotFound, path, "does not exist");
    return Status(Code::kNotFound, path, std::string("cannot be opened: ") + std::strerror(err));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return InvalidArgument(path, "not a regular file (a shape file must be a JSON file)");
  if (st.st_size > kMaxShapeFileBytes)
    return InvalidArgument(path, "the shape file is " + std::to_string(st.st_size) + " bytes; the limit is " +
                                     std::to_string(kMaxShapeFileBytes));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status(Code::kUnavailable, path, std::string("cannot read: ") + std::strerror(errno));
    if (got == 0) break;
    text.append(buf, static_cast<size_t>(got));
    if (static_cast<int64_t>(text.size()) > kMaxShapeFileBytes)  // grew while read
      return InvalidArgument(path, "the shape file is larger than " + std::to_string(kMaxShapeFileBytes) + " bytes");
  }
  if (text.empty()) return InvalidArgument(path, "the shape file is empty");
  return ShapesFromJsonText(text, path);
}

}  // namespace topk::tuner
