#include "generator/config.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "generator/family.hpp"

namespace topk::gen {
namespace {

Status BadId(std::string_view id, const std::string& why) {
  return Status(Code::kInvalidArgument, "Config::FromId", "malformed variant id '" + std::string(id) + "': " + why);
}

std::vector<std::string_view> SplitUnderscore(std::string_view s) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t u = s.find('_');
    parts.push_back(s.substr(0, u));
    if (u == std::string_view::npos) break;
    s = s.substr(u + 1);
  }
  return parts;
}

std::string KnownFamilies() {
  std::string out;
  for (const Family* f : Families()) out += (out.empty() ? "" : ", ") + f->name();
  return out;
}

}  // namespace

int Config::Get(std::string_view name, int fallback) const {
  for (const auto& [n, v] : params)
    if (n == name) return v;
  return fallback;
}

bool Config::Has(std::string_view name) const {
  return std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == name; });
}

void Config::Set(std::string_view name, int value) {
  for (auto& [n, v] : params)
    if (n == name) {
      v = value;
      return;
    }
  params.emplace_back(std::string(name), value);
}

const Family* Config::family_ptr() const { return FindFamily(family); }

std::string Config::Id() const {
  std::ostringstream s;
  s << family << '_' << DTypeName(dtype);
  const Family* f = family_ptr();
  for (const auto& [name, value] : params) {
    std::string tag = name;
    if (f)
      for (const ParamSpec& p : f->params())
        if (p.name == name) {
          tag = p.tag;
          if (p.IsImplicit(value)) tag.clear();  // left out: an id without it reads back the same
        }
    if (!tag.empty()) s << '_' << tag << value;
  }
  return s.str();
}

std::string Config::KernelKey() const {
  auto f = FamilyOf(*this);
  return f.ok() ? (*f)->KernelKey(*this) : Id();
}

StatusOr<Config> Config::FromId(std::string_view id) {
  const size_t u = id.find('_');
  if (u == std::string_view::npos || u == 0) return BadId(id, "expected '<family>_<dtype>_<fields>'");
  const Family* f = FindFamily(id.substr(0, u));
  if (!f) return BadId(id, "unknown family '" + std::string(id.substr(0, u)) + "' (known: " + KnownFamilies() + ")");
  const std::vector<std::string_view> parts = SplitUnderscore(id.substr(u + 1));
  const std::vector<ParamSpec>& specs = f->params();
  size_t required = 0;
  for (const ParamSpec& p : specs) required += p.implicit ? 0 : 1;
  if (parts.size() < required + 1 || parts.size() > specs.size() + 1) {
    if (auto legacy = f->FromLegacyId(id)) return *legacy;
    std::string count = std::to_string(required + 1);
    if (required < specs.size()) count += " to " + std::to_string(specs.size() + 1);
    return BadId(id, "expected " + count + " fields after '" + f->name() +
                         "_' (dtype, then one per parameter, in order; a parameter at its implicit value may be "
                         "left out)");
  }
  Config c;
  c.family = f->name();
  auto dt = ParseDType(parts[0]);
  if (!dt.ok()) return BadId(id, "unknown dtype '" + std::string(parts[0]) + "'");
  c.dtype = *dt;
  // The fields in the parameters' order; a parameter with an implicit value
  // may be absent (it then takes that value). `optional` lists the absent
  // ones since the last field read, for the message about a stray field.
  size_t next = 1;
  std::string optional;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string& tag = specs[i].tag;
    const std::string expected = "'" + tag + "<" + specs[i].name + ">'";
    int v = 0;
    bool ok = next < parts.size();
    if (ok) {
      const std::string_view field = parts[next];
      ok = field.size() > tag.size() && field.substr(0, tag.size()) == tag;
      if (ok) {
        const std::string_view digits = field.substr(tag.size());
        auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        ok = ec == std::errc() && p == digits.data() + digits.size();
      }
    }
    if (ok) {
      ++next;
      optional.clear();
    } else if (specs[i].implicit) {
      v = *specs[i].implicit;
      optional += (optional.empty() ? "" : ", ") + expected;
    } else {
      if (auto legacy = f->FromLegacyId(id)) return *legacy;
      const std::string got = next < parts.size() ? "'" + std::string(parts[next]) + "'" : "the end";
      return BadId(id, "field " + (optional.empty() ? "" : optional + " or ") + expected + " expected, got " + got);
    }
    c.params.emplace_back(specs[i].name, v);
  }
  if (next < parts.size()) {
    if (auto legacy = f->FromLegacyId(id)) return *legacy;
    return BadId(id, (optional.empty() ? std::string("the end") : "field " + optional + " or the end") +
                         " expected, got '" + std::string(parts[next]) + "'");
  }
  return c;
}

nlohmann::json Config::ToJson() const {
  nlohmann::json j = {{"family", family}, {"dtype", DTypeName(dtype)}};
  const Family* f = family_ptr();
  for (const auto& [name, value] : params) {
    bool implicit = false;
    if (f)
      for (const ParamSpec& p : f->params())
        if (p.name == name) implicit = p.IsImplicit(value);
    if (!implicit) j[name] = value;  // an absent field reads back as the implicit value
  }
  return j;
}

StatusOr<Config> Config::FromJson(const nlohmann::json& j) {
  auto bad = [](const std::string& why) { return Status(Code::kInvalidArgument, "Config::FromJson", why); };
  if (!j.is_object()) return bad("expected a JSON object");
  if (!j.contains("family")) {
    for (const Family* f : Families())
      if (auto legacy = f->FromLegacyJson(j)) return *legacy;
    return bad("no \"family\" field, and not a configuration of an earlier release");
  }
  if (!j["family"].is_string()) return bad("\"family\" must be a string");
  const Family* f = FindFamily(j["family"].get<std::string>());
  if (!f) return bad("unknown family '" + j["family"].get<std::string>() + "' (known: " + KnownFamilies() + ")");
  if (!j.contains("dtype") || !j["dtype"].is_string()) return bad("missing or mistyped field \"dtype\"");
  auto dt = ParseDType(j["dtype"].get<std::string>());
  if (!dt.ok()) return dt.status();
  Config c;
  c.family = f->name();
  c.dtype = *dt;
  for (const ParamSpec& p : f->params()) {
    if (!j.contains(p.name) && p.implicit) {
      c.params.emplace_back(p.name, *p.implicit);
      continue;
    }
    if (!j.contains(p.name) || !j[p.name].is_number_integer())
      return bad("missing or mistyped field \"" + p.name + "\" (family " + f->name() + ")");
    const auto v = j[p.name].get<int64_t>();
    if (v < INT32_MIN || v > INT32_MAX) return bad("field \"" + p.name + "\" out of range");
    c.params.emplace_back(p.name, static_cast<int>(v));
  }
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (key == "family" || key == "dtype") continue;
    if (!c.Has(key)) return bad("unknown field \"" + key + "\" for family " + f->name());
  }
  return c;
}

std::ostream& operator<<(std::ostream& os, const Config& c) { return os << c.Id(); }

Arch Arch::Sm80() {
  Arch a;
  a.cc_major = 8;
  a.cc_minor = 0;
  a.max_smem_optin = 166912;  // 163 KB
  a.sm_count = 108;
  return a;
}

Arch Arch::Sm90() { return Arch(); }

StatusOr<Arch> Arch::FromName(std::string_view name) {
  std::string_view s = name;
  if (s.substr(0, 3) == "sm_") s = s.substr(3);
  int cc = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), cc);
  // Up to sm_120 (Blackwell): a larger number is a typo, not a future GPU
  // whose limits we could know.
  if (ec != std::errc() || p != s.data() + s.size() || cc < 80 || cc > kMaxArchCc)
    return Status(Code::kInvalidArgument, "Arch::FromName",
                  "unsupported architecture '" + std::string(name.substr(0, 32)) + "' (need sm_80 to sm_" +
                      std::to_string(kMaxArchCc) + ", e.g. sm_90)");
  Arch a = cc >= 90 ? Sm90() : Sm80();
  a.cc_major = cc / 10;
  a.cc_minor = cc % 10;
  if (cc == 86 || cc == 89) a.max_smem_optin = 101376;  // 99 KB
  return a;
}

Status Validate(const Config& c, const Arch& arch) {
  TOPK_ASSIGN_OR_RETURN(const Family* f, FamilyOf(c));
  return f->Validate(c, arch);
}

Status ValidateFor(const Config& c, const Arch& arch, const Problem& p) {
  TOPK_ASSIGN_OR_RETURN(const Family* f, FamilyOf(c));
  TOPK_RETURN_IF_ERROR(f->Validate(c, arch));
  if (c.dtype != p.dtype)
    return Status(Code::kInvalidArgument, "constraint dtype",
                  std::string("variant is ") + DTypeName(c.dtype) + ", problem is " + DTypeName(p.dtype));
  return f->ValidateFor(c, arch, p);
}

std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts) {
  std::vector<Config> out;
  for (const Family* f : Families()) {
    if (!opts.families.empty() &&
        std::find(opts.families.begin(), opts.families.end(), f->name()) == opts.families.end())
      continue;
    for (Config& c : f->Enumerate(p, arch, opts))
      if (ValidateFor(c, arch, p).ok()) out.push_back(std::move(c));
  }
  return out;
}

std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch) {
  std::vector<Config> out;
  for (const Family* f : Families())
    for (Config& c : f->EnumerateKernels(dtype, arch))
      if (Validate(c, arch).ok()) out.push_back(std::move(c));
  return out;
}

Config DefaultConfig(const Problem& p, const Arch& arch) {
  for (const Family* f : Families())
    if (auto c = f->Default(p, arch)) return *c;
  // The radix family serves every problem; reaching this means it is gone.
  return Config();
}

}  // namespace topk::gen
