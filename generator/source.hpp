// CUDA source text for one variant: one #include of the kernel family plus
// one explicit instantiation, compiled by NVRTC (headers passed from the
// copies embedded at build time) or offline by nvcc (-I templates, or the
// standalone form with the headers inlined).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "generator/config.hpp"

namespace topk::gen {

struct KernelSource {
  std::string key;              // Config::KernelKey(), "sort_f32", "fault_crash", ...
  std::string file_name;        // e.g. "kernel_f32_b512_r11_c1_i0.cu"
  std::string text;             // the generated translation unit
  std::string name_expression;  // for nvrtcAddNameExpression
  std::string hash;             // 16 hex digits over text + every embedded template
};

// The first kernel of `c`'s family for `c` (for one-kernel families, the
// only one; GenerateSources in generator/family.hpp gives all of them).
KernelSource GenerateSource(const Config& c);
// The translation unit of one topk::topk_kernel instantiation (the template
// in templates/topk/kernels.cuh that the radix and warp families share):
// `policy` is the topk::Policy<...> (or topk::Strategy<...>) type, and the
// static_asserts check that host and template agree on the histogram bytes
// and the digit passes; `extra_asserts` (whole lines, about `P`) go beside
// them.
KernelSource TopkKernelSource(const std::string& key, const std::string& policy, int hist_smem_bytes, int passes,
                              const std::string& extra_asserts = "");
// Sets `s.hash` from its text and every embedded template.
KernelSource FinishSource(KernelSource s);
// The kernel that sorts finished rows (sorted output).
KernelSource SortSource(DType dtype);
// The tie pass of deterministic mode (templates/topk/ties.cuh): the lowest
// indices among the elements equal to each row's k-th value.
KernelSource TieSource(DType dtype);
// Test-only kernels with a variant's signature: "crash" (illegal address),
// "hang" (never returns), "wrong" (every index 0).
StatusOr<KernelSource> FaultSource(const std::string& kind);

// The template headers as embedded at build time: (include name, text),
// e.g. ("topk/kernels.cuh", "...").
const std::vector<std::pair<std::string, std::string>>& EmbeddedTemplates();
// Hash over every embedded template (part of each source hash).
const std::string& TemplatesHash();
// `src.text` with every #include "topk/..." expanded once (#pragma once
// honoured), so that `nvcc -arch=sm_90 -cubin file.cu` compiles it alone.
std::string Standalone(const KernelSource& src);

// 64-bit FNV-1a as 16 hex digits.
std::string HashHex(const std::string& data);

}  // namespace topk::gen
