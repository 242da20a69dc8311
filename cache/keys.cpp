// The textual keys the cache stores: problem keys, flags keys and outcome
// names. They are part of the file format, so they never change meaning.
#include <charconv>
#include <string_view>
#include <vector>

#include "cache/cache.hpp"

namespace topk::cache {

namespace {

std::vector<std::string_view> SplitBars(std::string_view s) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t bar = s.find('|');
    parts.push_back(s.substr(0, bar));
    if (bar == std::string_view::npos) return parts;
    s = s.substr(bar + 1);
  }
}

std::string Flags(const Problem& p) {
  std::string s;
  s += p.largest ? "largest" : "smallest";
  s += p.ranges ? "|ranges" : "|noranges";
  s += p.values ? "|values" : "|novalues";
  s += p.sorted ? "|sorted" : "|unsorted";
  return s;
}

// One of two words, e.g. "largest" / "smallest".
bool ParseWord(std::string_view field, std::string_view yes, std::string_view no, bool* out) {
  if (field == yes) {
    *out = true;
    return true;
  }
  if (field == no) {
    *out = false;
    return true;
  }
  return false;
}

// "<tag><decimal digits>", no sign, no spaces, no trailing characters.
bool ParseTagged(std::string_view field, char tag, int64_t* out) {
  if (field.size() < 2 || field[0] != tag) return false;
  const char* first = field.data() + 1;
  const char* last = field.data() + field.size();
  if (*first < '0' || *first > '9') return false;  // from_chars would take '-'
  auto [p, ec] = std::from_chars(first, last, *out);
  return ec == std::errc() && p == last;
}

}  // namespace

std::string ProblemKey(const Problem& p) {
  return std::string(DTypeName(p.dtype)) + "|b" + std::to_string(p.batch) + "|n" + std::to_string(p.n) + "|k" +
         std::to_string(p.k) + "|" + Flags(p);
}

std::string FlagsKey(const Problem& p) { return std::string(DTypeName(p.dtype)) + "|" + Flags(p); }

StatusOr<Problem> ParseProblemKey(const std::string& key) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "ParseProblemKey",
                  "malformed problem key '" + key + "': " + why +
                      " (expected e.g. 'f32|b64|n32768|k2048|largest|noranges|novalues|unsorted')");
  };
  const std::vector<std::string_view> f = SplitBars(key);
  if (f.size() != 8) return bad("expected 8 '|'-separated fields, got " + std::to_string(f.size()));
  Problem p;
  // Only the canonical dtype names: a key is written by ProblemKey, and
  // accepting aliases ("fp32") would give one problem two keys.
  if (f[0] == "f32") {
    p.dtype = DType::kF32;
  } else if (f[0] == "f16") {
    p.dtype = DType::kF16;
  } else if (f[0] == "bf16") {
    p.dtype = DType::kBF16;
  } else {
    return bad("unknown dtype '" + std::string(f[0]) + "'");
  }
  if (!ParseTagged(f[1], 'b', &p.batch)) return bad("field 2 must be 'b<batch>'");
  if (!ParseTagged(f[2], 'n', &p.n)) return bad("field 3 must be 'n<n>'");
  if (!ParseTagged(f[3], 'k', &p.k)) return bad("field 4 must be 'k<k>'");
  if (!ParseWord(f[4], "largest", "smallest", &p.largest)) return bad("field 5 must be 'largest' or 'smallest'");
  if (!ParseWord(f[5], "ranges", "noranges", &p.ranges)) return bad("field 6 must be 'ranges' or 'noranges'");
  if (!ParseWord(f[6], "values", "novalues", &p.values)) return bad("field 7 must be 'values' or 'novalues'");
  if (!ParseWord(f[7], "sorted", "unsorted", &p.sorted)) return bad("field 8 must be 'sorted' or 'unsorted'");
  if (Status s = p.Validate(); !s.ok()) return bad(s.message());
  return p;
}

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk: return "ok";
    case Outcome::kCompileError: return "compile_error";
    case Outcome::kResourceLimit: return "resource_limit";
    case Outcome::kWrongResult: return "wrong_result";
    case Outcome::kCrash: return "crash";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kSkipped: return "skipped";
  }
  return "unknown";
}

StatusOr<Outcome> ParseOutcome(const std::string& name) {
  for (Outcome o : {Outcome::kOk, Outcome::kCompileError, Outcome::kResourceLimit, Outcome::kWrongResult,
                    Outcome::kCrash, Outcome::kTimeout, Outcome::kSkipped}) {
    if (name == OutcomeName(o)) return o;
  }
  return Status(Code::kInvalidArgument, "ParseOutcome",
                "unknown outcome '" + name +
                    "' (expected ok, compile_error, resource_limit, wrong_result, crash, timeout or skipped)");
}

}  // namespace topk::cache
