// `space` and `emit`: the generator's view of a problem. No GPU, no cache.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "generator/config.hpp"
#include "generator/family.hpp"
#include "generator/source.hpp"
#include "jit/compiler.hpp"
#include "tools/atomic_file.hpp"
#include "tools/cli_common.hpp"

namespace topk::cli {

namespace {

const char* const kArchHint = "pass --arch sm_80 ... sm_120 (e.g. sm_90 for H100, sm_80 for A100)";

StatusOr<gen::Arch> ParseArch(const std::string& name) {
  auto a = gen::Arch::FromName(name);
  if (!a.ok()) return InvalidArgument("--arch", a.status().message());
  return a;
}

// The space as one table per family: the id, then each parameter's value.
void PrintSpaceTables(const std::vector<gen::Config>& space, size_t shown, const gen::Config& def) {
  std::vector<std::string> order;
  for (size_t i = 0; i < shown; ++i)
    if (std::find(order.begin(), order.end(), space[i].family) == order.end()) order.push_back(space[i].family);
  for (const std::string& name : order) {
    const gen::Family* f = gen::FindFamily(name);
    if (!f) continue;
    std::cout << "family " << name << ": " << f->summary() << "\n";
    // A parameter at its implicit value in every row (a strategy switch left
    // automatic) gets no column: the ids leave it out too.
    const std::vector<gen::ParamSpec>& specs = f->params();
    std::vector<bool> column(specs.size(), false);
    for (size_t i = 0; i < shown; ++i)
      if (space[i].family == name)
        for (size_t j = 0; j < specs.size() && j < space[i].params.size(); ++j)
          column[j] = column[j] || !specs[j].IsImplicit(space[i].params[j].second);
    std::vector<std::string> header = {"id"};
    for (size_t j = 0; j < specs.size(); ++j)
      if (column[j]) header.push_back(specs[j].name);
    Table t(header);
    for (size_t i = 0; i < shown; ++i) {
      if (space[i].family != name) continue;
      std::vector<std::string> row = {space[i].Id() + (space[i] == def ? " *" : "")};
      for (size_t j = 0; j < space[i].params.size(); ++j)
        if (j >= column.size() || column[j]) row.push_back(std::to_string(space[i].params[j].second));
      t.Add(std::move(row));
    }
    t.Print(std::cout);
    std::cout << "\n";
  }
}

}  // namespace

Command AddSpace(CLI::App& root) {
  struct Opts {
    std::string shape;
    std::string arch = "sm_90";
    int limit = 0;
    std::vector<std::string> families;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = root.add_subcommand("space", "List the variant space for one problem shape (no GPU needed)");
  // Checked in run() rather than with ->required(): CLI11 reports missing
  // options before unknown ones, which hides a mistyped flag.
  app->add_option("--shape", o->shape, std::string("The problem (required): ") + kShapeHelp);
  app->add_option("--arch", o->arch, "Target architecture, sm_80 to sm_120")->capture_default_str();
  app->add_option("--limit", o->limit, "Print at most this many variants (0: all)")
      ->check(IntegerIn(0, std::numeric_limits<int>::max()));
  app->add_option("--family", o->families, "Only these kernel families (repeatable; default: all)");
  app->footer("Example: topk-tune space --shape f32:64x32768:2048:ranges --arch sm_90");

  auto run = [o]() -> int {
    if (o->shape.empty()) return Fail(kExitUsage, "space needs --shape SHAPE", std::string("SHAPE is ") + kShapeHelp);
    auto p = ParseShape(o->shape);
    if (!p.ok()) return Fail(kExitUsage, p.status().message());
    auto arch = ParseArch(o->arch);
    if (!arch.ok()) return Fail(kExitUsage, arch.status().message(), kArchHint);
    for (const std::string& f : o->families)
      if (!gen::FindFamily(f)) {
        std::string known;
        for (const gen::Family* k : gen::Families()) known += (known.empty() ? "" : ", ") + k->name();
        return Fail(kExitUsage, "unknown kernel family '" + f + "'", "the families are: " + known);
      }
    gen::SpaceOptions so;
    so.families = o->families;
    const std::vector<gen::Config> space = gen::Enumerate(*p, *arch, so);
    const gen::Config def = gen::DefaultConfig(*p, *arch);
    std::set<std::string> kernels;
    for (const auto& c : space) kernels.insert(c.KernelKey());
    const size_t shown = o->limit > 0 ? std::min(space.size(), static_cast<size_t>(o->limit)) : space.size();
    if (Global().json) {
      nlohmann::json j = {{"shape", p->ToString()},   {"spec", ShapeSpec(*p)},     {"arch", arch->Name()},
                          {"variants", space.size()}, {"kernels", kernels.size()}, {"default", def.Id()}};
      nlohmann::json list = nlohmann::json::array();
      for (size_t i = 0; i < shown; ++i) {
        nlohmann::json c = space[i].ToJson();
        c["id"] = space[i].Id();
        c["kernel"] = space[i].KernelKey();
        list.push_back(std::move(c));
      }
      j["configs"] = std::move(list);
      return JsonResult(std::move(j));
    }
    std::cout << "shape    " << p->ToString() << " (" << ShapeSpec(*p) << ")\n"
              << "arch     " << arch->Name() << "\n"
              << "variants " << space.size() << "\n"
              << "kernels  " << kernels.size() << " distinct binaries (the other knobs are launch arguments)\n"
              << "default  " << def.Id() << "\n\n";
    PrintSpaceTables(space, shown, def);
    if (shown < space.size()) std::cout << "... " << space.size() - shown << " more (drop --limit to see all)\n";
    std::cout << "\n* the default configuration. Print one with: topk-tune emit --variant ID\n";
    return kExitOk;
  };
  return {app, run};
}

Command AddEmit(CLI::App& root) {
  struct Opts {
    std::string variant;
    bool use_default = false;
    std::string shape;
    std::string arch = "sm_90";
    bool standalone = false;
    bool resources = false;
    std::string out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = root.add_subcommand("emit", "Print the CUDA source of one variant (no GPU needed)");
  auto* v = app->add_option("--variant", o->variant, "Variant id, e.g. radix_f32_b512_r11_h0_s4096_c1_t1_m1");
  auto* d = app->add_flag("--default", o->use_default, "The default variant for --shape instead of --variant");
  app->add_option("--shape", o->shape,
                  std::string("Problem for --default (also checks --variant fits it): ") + kShapeHelp);
  app->add_option("--arch", o->arch, "Architecture the variant must be valid for")->capture_default_str();
  app->add_flag("--standalone", o->standalone,
                "Inline the template headers so that `nvcc -arch=sm_90 -cubin FILE.cu` compiles it alone");
  app->add_option("-o,--out", o->out, "Write the source to this file instead of stdout");
  app->add_flag("--resources", o->resources,
                "Compile the kernel with NVRTC for --arch and print its registers, stack and spills instead of the "
                "source (with -o, the source is still written)");
  v->excludes(d);
  app->footer(
      "Examples:\n"
      "  topk-tune emit --variant radix_f32_b512_r11_h0_s4096_c1_t1_m1\n"
      "  topk-tune emit --default --shape f32:64x32768:2048:ranges --standalone -o kernel.cu\n"
      "  nvcc -arch=sm_90 -cubin kernel.cu\n"
      "  topk-tune emit --variant radix_f32_b1024_r11_h0_s4096_c16_t1_m1 --resources");

  auto run = [o]() -> int {
    if (o->variant.empty() && !o->use_default)
      return Fail(kExitUsage, "emit needs --variant ID or --default --shape SHAPE",
                  "list the ids of a shape with: topk-tune space --shape SHAPE");
    if (o->use_default && o->shape.empty())
      return Fail(kExitUsage, "--default needs --shape SHAPE", std::string("SHAPE is ") + kShapeHelp);
    auto arch = ParseArch(o->arch);
    if (!arch.ok()) return Fail(kExitUsage, arch.status().message(), kArchHint);
    std::optional<Problem> p;
    if (!o->shape.empty()) {
      auto ps = ParseShape(o->shape);
      if (!ps.ok()) return Fail(kExitUsage, ps.status().message());
      p = *ps;
    }
    gen::Config c;
    if (o->use_default) {
      c = gen::DefaultConfig(*p, *arch);
    } else {
      auto parsed = gen::Config::FromId(o->variant);
      if (!parsed.ok())
        return Fail(kExitUsage, parsed.status().message(),
                    "variant ids look like radix_f32_b512_r11_h0_s4096_c1_t1_m1; topk-tune space lists them");
      c = *parsed;
    }
    Status valid = p ? gen::ValidateFor(c, *arch, *p) : gen::Validate(c, *arch);
    if (!valid.ok())
      return Fail(kExitUsage,
                  "variant " + c.Id() + " is not valid on " + arch->Name() + ": " +
                      (valid.where().empty() ? "" : valid.where() + ": ") + valid.message(),
                  "topk-tune space --shape SHAPE lists the valid variants of a shape");
    const std::vector<gen::KernelSource> srcs = gen::GenerateSources(c);
    if (srcs.empty()) return Fail(kExitError, "family " + c.family + " gave no source for " + c.Id());
    const gen::KernelSource& src = srcs.front();
    std::string text;
    for (const gen::KernelSource& one : srcs) text += o->standalone ? gen::Standalone(one) : one.text;
    if (o->resources) {
      jit::CompileOptions opts;
      opts.arch = arch->Name();
      auto compiled = jit::MakeNvrtcCompiler()->Compile(src, opts);
      if (!compiled.ok()) return Fail(kExitError, "compiling " + c.Id() + " failed: " + compiled.status().message());
      const jit::ResourceUsage& u = compiled->usage;
      std::cout << "kernel " << src.key << " (variant " << c.Id() << ") for " << opts.arch << ", "
                << compiled->compiler_version << ": ";
      if (Global().json && o->out.empty())
        return JsonResult({{"variant", c.Id()},
                           {"kernel", src.key},
                           {"arch", opts.arch},
                           {"compiler", compiled->compiler_version},
                           {"known", u.known},
                           {"registers", u.registers},
                           {"stack_bytes", u.stack_bytes},
                           {"spill_stores", u.spill_stores},
                           {"spill_loads", u.spill_loads}});
      if (Global().json) {
        // the source is still written below; its result carries the usage
      } else if (u.known)
        std::cout << u.registers << " registers, " << u.stack_bytes << " bytes stack, " << u.spill_stores
                  << " bytes spill stores, " << u.spill_loads << " bytes spill loads"
                  << (u.spills() ? " (spills)" : "") << "\n";
      else
        std::cout << "no resource report in the compiler log\n";
      if (o->out.empty()) return kExitOk;
    }
    if (o->out.empty() && Global().json)
      return JsonResult({{"variant", c.Id()}, {"kernel", src.key}, {"source", text}});
    if (o->out.empty()) {
      std::cout << text;
      if (!text.empty() && text.back() != '\n') std::cout << "\n";
      return kExitOk;
    }
    if (Status s = WriteFileAtomically(o->out, text); !s.ok())
      return Fail(kExitUsage, s.message(), "check the directory exists and is writable");
    if (Global().json)
      return JsonResult({{"variant", c.Id()}, {"kernel", src.key}, {"out", o->out}, {"bytes", text.size()}});
    Info("wrote " + o->out + " (" + std::to_string(text.size()) + " bytes, variant " + c.Id() + ", kernel " +
         src.key + ")");
    return kExitOk;
  };
  return {app, run};
}

}  // namespace topk::cli
