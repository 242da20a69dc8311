// Radix-select top-k for one row per CTA or per thread-block cluster.
//
// Pass 0 histograms one digit of every key of the row (reading it from global
// memory once and, when the launch gives a row cache, keeping the keys in
// shared memory). A suffix scan over the histogram finds the bin that holds
// the k-th key: elements above it are selected, elements below are dropped,
// the bin's elements stay candidates. Each refinement pass fuses three things
// into one scan over the candidates: write the elements above the previous
// threshold, keep those in its bin, and histogram their next digit.
//
// Candidates live in a shared-memory buffer when they fit (known exactly from
// the pass-0 histogram before anything is copied, so the buffer never
// overflows); otherwise later passes re-read the row (cache, then global
// memory) and re-test the resolved key prefix. Both paths are exact; neither
// clips. In a cluster, when the whole threshold bin fits one buffer, every
// CTA sends its candidates to the leader CTA and the leader finishes alone:
// the later passes then cost no cluster barriers or distributed-memory
// histogram merges, which the profile showed to dominate long rows. A
// cluster's CTAs take their output slots and their places in the leader's
// buffer from bases the merged histograms give (the CTAs ranked below count
// first), so no scan does an atomic on another CTA's shared memory. Large
// merges (2048 bins over 8 or 16 CTAs) are a reduce-scatter: each CTA sums
// a share of the bins over the cluster and stores the sums to every CTA.
//
// The scan stops early when the threshold bin holds exactly the elements still
// needed, ranks the candidates directly once they are few (after `rounds`
// refinement passes, when at most TOPK_RANK_CAP remain), and at the last digit
// takes the still-needed ties in any order from a separate counter, so the
// output never exceeds k; when only ties are left, that last scan stops as
// soon as they are taken.
#pragma once
#include "topk/radix/row_select.cuh"
#include "topk/radix/digits.cuh"
#include "topk/radix/output.cuh"
#include "topk/radix/histogram.cuh"
#include "topk/radix/speculation.cuh"
#include "topk/radix/row_scan.cuh"
#include "topk/radix/candidate_scan.cuh"
#include "topk/radix/uniform_bin.cuh"
#include "topk/radix/ranking.cuh"
#include "topk/radix/cluster_merge.cuh"
#include "topk/radix/cluster_driver.cuh"
#include "topk/radix/driver.cuh"
