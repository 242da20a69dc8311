// Ranking: the last step when few candidates remain; each candidate in a
// rank list counts those (in every CTA of the row) that beat it and writes
// itself if it is among the `need` best. Needs a barrier over the row after
// the lists are filled.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

// Final step when few candidates remain: every candidate counts the
// candidates (in all CTAs working on the row) that beat it; ties go to the
// lower index.
template <class P>
__device__ __forceinline__ void RowSelect<P>::rank_finish() {
  const u32 n_local = ctl->list_n;
  for (u32 i = threadIdx.x; i < n_local; i += T) {
    const u64 x = list[i];
    u32 r = 0;
    for (int c = 0; c < C; ++c) {
      const u32 n = Cl::load(Cl::map(&ctl->list_n, c));
      const u32 a = Cl::map(list, c);
      for (u32 j = 0; j < n; ++j) r += Cl::load64(a + 8 * j) > x ? 1u : 0u;
    }
    if (r < need) write(static_cast<u32>(k) - need + r, 0xffffffffu - static_cast<u32>(x));
  }
}

}  // namespace topk
