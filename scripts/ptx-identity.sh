#!/usr/bin/env bash
# Checks that the working tree generates the same machine code as git
# revision REV (default HEAD): for every distinct kernel of a set of shapes
# that spans the variant axes (families, dtypes, radix widths, first digits,
# block sizes, cluster sizes, flags), both trees emit the source, NVRTC
# compiles it with the JIT's options (scripts/nvrtc-ptx.cpp) and the PTX and
# the cubin's code sections are hashed. A template restructuring must leave every hash as it
# was. Launch arguments (buffer, rounds, row cache) do not change the code:
# one variant per kernel key covers them.
#
# Usage: scripts/ptx-identity.sh [REV]
# Environment: ARCH (sm_90), JOBS (nproc), BUILD (build: the working tree's
# build directory, topk-tune is built there), SHAPES (space-separated shapes,
# replaces the default set). REV's hashes are kept in
# BUILD/ptx-identity/REV-SHA-ARCH-SETHASH.sums, so a later run against the same
# revision only compiles the working tree.
# Exit status: 0 identical, 1 a difference (listed), 2 a setup error.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
rev=${1:-HEAD}
arch=${ARCH:-sm_90}
jobs=${JOBS:-$(nproc)}
build=${BUILD:-build}
cuda=${CUDA_HOME:-/usr/local/cuda}
shapes=${SHAPES:-"f32:64x32768:2048:ranges f32:128x131072:64 f32:1x524288:512:values
f16:128x201088:64:sorted bf16:128x201088:64:values:smallest f32:256x128256:1024:sorted:smallest
f32:4096x256:8 bf16:4096x64:6:values f16:2048x512:32:sorted f32:64x4096:16:ranges"}
sha=$(git rev-parse --verify "$rev^{commit}") || { echo "ptx-identity: unknown revision '$rev'" >&2; exit 2; }
work="$root/$build/ptx-identity"
mkdir -p "$work"

log() { echo "ptx-identity: $*" >&2; }

tool="$work/nvrtc-ptx"
if [[ ! -x $tool || scripts/nvrtc-ptx.cpp -nt $tool ]]; then
  g++ -std=c++17 -O1 -Wall -Wextra -I"$cuda/include" scripts/nvrtc-ptx.cpp -L"$cuda/lib64" -lnvrtc \
    -Wl,-rpath,"$cuda/lib64" -o "$tool"
fi

# The cubin's machine code: every section but the symbol and string tables
# and the notes (they hold the symbol names, see norm below), by name, type,
# size and contents. The toolkit may lack cuobjdump and nvdisasm; the code
# bytes say the same as their listing.
digest="$work/cubin-digest.py"
cat > "$digest" <<'PY'
import hashlib, struct, sys
d = open(sys.argv[1], "rb").read()
assert d[:4] == b"\x7fELF" and d[4] == 2, "64-bit ELF expected"
shoff, = struct.unpack_from("<Q", d, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
secs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
names = secs[shstrndx]
def name(off):
    s = names[4] + off
    return d[s:d.index(b"\0", s)].decode()
for sh in secs[1:]:
    n = name(sh[0])
    if n in (".shstrtab", ".strtab", ".symtab") or n.startswith(".note"):
        continue
    body = b"" if sh[1] == 8 else d[sh[4]:sh[4] + sh[5]]  # SHT_NOBITS: size only
    print(n, sh[1], sh[5], hashlib.sha256(body).hexdigest())
PY

# Names of internal-linkage symbols (a namespace-scope constant such as
# topk::kFullMask) carry a hash of the translation unit's text, comments
# included: the only part of the PTX that a change of comments or of the
# headers' layout alters. They are replaced by a fixed name before hashing.
norm='s/_ZN[0-9]+_INTERNAL_[0-9a-f]+_[0-9]+_[A-Za-z0-9_]+_cu_[0-9a-f]+_[0-9]+/_ZN_INTERNAL_/g'

# hashes TREE TOPK_TUNE OUT.sums: one line per kernel key, "KEY PTX-SHA CUBIN-CODE-SHA".
hashes() {
  local tree=$1 bin=$2 out=$3 dir
  dir=$(mktemp -d "$work/run.XXXXXX")
  local shape
  for shape in $shapes; do
    "$bin" --json space --shape "$shape" --arch "$arch" > "$dir/space.json"
    python3 - "$dir/space.json" "$shape" >> "$dir/list" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for c in j["configs"]:
    print(c["kernel"], c["id"], sys.argv[2])
PY
  done
  # One variant per kernel key (the first shape that has it).
  sort -k1,1 -s "$dir/list" | awk '!seen[$1]++' > "$dir/pick"
  log "$(wc -l < "$dir/pick") kernels from $tree"
  local key id shape_
  while read -r key id shape_; do
    "$bin" -q emit --variant "$id" --shape "$shape_" --arch "$arch" -o "$dir/$key.cu"
  done < "$dir/pick"
  export tool arch tree dir norm digest
  cut -d' ' -f1 "$dir/pick" | xargs -P "$jobs" -I{} bash -c '
    k={}
    "$tool" "$arch" "$tree/templates" "$dir/$k.cu" "$dir/$k.ptx" "$dir/$k.cubin" || exit 255
    p=$(sed -E "$norm" "$dir/$k.ptx" | sha256sum | cut -c1-16)
    s=$(python3 "$digest" "$dir/$k.cubin" | sha256sum | cut -c1-16)
    echo "$k $p $s" > "$dir/$k.sum"'
  cat "$dir"/*.sum | sort > "$out"
  rm -rf "$dir"
}

set_hash=$(echo "$arch $shapes" | sha256sum | cut -c1-12)
base="$work/$sha-$arch-$set_hash.sums"
if [[ ! -s $base ]]; then
  src="$work/src-$sha"
  if [[ ! -x $src/build/bin/topk-tune ]]; then
    log "building topk-tune at $rev ($sha)"
    rm -rf "$src" && mkdir -p "$src"
    git archive "$sha" | tar -x -C "$src"
    cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release > "$src/configure.log" 2>&1
    cmake --build "$src/build" -j"$jobs" --target topk-tune > "$src/build.log" 2>&1
  fi
  hashes "$src" "$src/build/bin/topk-tune" "$base.tmp"
  mv "$base.tmp" "$base"
fi

log "building topk-tune in the working tree"
cmake --build "$build" -j"$jobs" --target topk-tune > "$work/build.log" 2>&1
now="$work/worktree.sums"
hashes "$root" "$root/$build/bin/topk-tune" "$now"

if diff -u "$base" "$now" > "$work/diff.txt"; then
  log "identical: $(wc -l < "$now") kernels, PTX and cubin code, against $rev"
  exit 0
fi
log "machine code differs from $rev (KEY PTX CUBIN-CODE):"
cat "$work/diff.txt" >&2
exit 1
