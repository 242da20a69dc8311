#!/usr/bin/env bash
# Hostile inputs to the topk-tune CLI on a machine without a GPU: no data lost, read-only
# deployments, bounded input.
#
#   scripts/hostile-inputs.sh > table.md
#
# Each case runs `topk-tune` in a fresh scratch folder (mktemp -d) with HOME pointing into it and
# TOPK_TUNE_DB / XDG_CACHE_HOME unset, records the exit code, the first line of stderr (with
# --json: the "error" of the JSON object on stdout) and the files of the scratch folder (name,
# size, and the sha1 of every *.db) before and after, and prints one Markdown table row. A case
# passes when the exit code is the expected one (docs/CLI.md) AND the files after are the
# expected ones: unchanged, or the files before plus the named new ones (their folders allowed),
# the old ones byte for byte the same; some cases also check the message or the JSON object.
# The last line is "N passed, M failed"; the exit status is 1 if any case failed.
#
# The binary: $TOPK_TUNE_BIN (default build/bin/topk-tune under the repository root);
# topk-tune-worker is looked up beside it as usual. As root, the read-only cases run as
# nobody (setpriv, else runuser) so that the permissions are enforced; without either they run
# as root and the row says so.
#
# Not covered here (needs a GPU run): SIGINT/SIGTERM during `tune` exits 130, kills its workers,
# removes its scratch folders and keeps every finished measurement. tests/cli_test.cpp checks
# the same cases in ctest; this script only prints them as a table.
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${TOPK_TUNE_BIN:-$ROOT/build/bin/topk-tune}
case $BIN in /*) ;; *) BIN=$(cd "$(dirname "$BIN")" 2>/dev/null && pwd)/$(basename "$BIN") ;; esac
if [[ ! -x $BIN ]]; then
  echo "hostile-inputs.sh: no topk-tune binary at '$BIN' (build it, or set TOPK_TUNE_BIN)" >&2
  exit 2
fi
if ! command -v jq >/dev/null; then
  echo "hostile-inputs.sh: needs jq (the --json cases parse the object)" >&2
  exit 2
fi

WORK=$(mktemp -d)          # captured stdout/stderr, outside every scratch folder
SCRATCH=()
cleanup() {
  local d
  for d in "${SCRATCH[@]}"; do chmod -R u+rwX "$d" 2>/dev/null; rm -rf "$d"; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Who runs the read-only cases.
AS_USER=()
AS_NOTE=""
if [[ $(id -u) == 0 ]]; then
  if command -v setpriv >/dev/null; then
    AS_USER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  elif command -v runuser >/dev/null; then
    AS_USER=(runuser -u nobody --)
  else
    AS_NOTE="[ran as root: permissions not enforced] "
  fi
fi

# A one-winner cache export (the format of `topk-tune export`, schema 2).
write_jsonl() {
  cat >"$1" <<'EOF'
{"table":"meta","application":"topk-tune","schema_version":2,"exported":"2025-01-31T12:00:00.000Z"}
{"table":"devices","fingerprint":"dev0","name":"NVIDIA H100","cc_major":9,"cc_minor":0,"sm_count":132,"l2_bytes":52428800,"driver_version":12040,"compiler_version":"12.4","info_json":"{}"}
{"table":"variants","id":"warp_f32_b128_i8_l1","config":{"family":"warp","dtype":"f32","block_threads":128,"items":8,"lane_bound":1},"kernel_key":"k","source_hash":"h"}
{"table":"measurements","id":1,"device":"dev0","variant_id":"warp_f32_b128_i8_l1","problem":"f32|b64|n256|k8|largest|noranges|novalues|unsorted","row_stride":0,"input_dist":"uniform","l2_mode":"hot","outcome":"ok","median_us":4.5,"p10_us":4.4,"p90_us":4.7,"min_us":4.3,"repetitions":3,"samples_us":[4.4,4.5,4.7],"verified":true,"message":"","tune_run":"r1","created":"2025-01-31T12:00:00.000Z"}
{"table":"winners","device":"dev0","problem":"f32|b64|n256|k8|largest|noranges|novalues|unsorted","row_stride":0,"variant_id":"warp_f32_b128_i8_l1","median_us":4.5,"default_us":5.0,"baseline_us":0,"baseline_name":"","measurement_id":1,"updated":"2025-01-31T12:00:01.000Z","measurement":{"device":"dev0","variant_id":"warp_f32_b128_i8_l1","problem":"f32|b64|n256|k8|largest|noranges|novalues|unsorted","input_dist":"uniform","l2_mode":"hot"}}
{"table":"baselines","device":"dev0","problem":"f32|b64|n256|k8|largest|noranges|novalues|unsorted","row_stride":0,"name":"torch.topk","median_us":6.0,"created":"2025-01-31T12:00:02.000Z"}
EOF
}

# A cache with that one winner, built once per run and copied: `make_cache PATH`. (Its sha1
# changes from run to run, as the import records its time; within a run every case starts from
# the same bytes.)
make_cache() {
  local j="$WORK/fixture.jsonl" db="$WORK/fixture.db"
  if [[ ! -f $db ]]; then
    write_jsonl "$j"
    "$BIN" import "$j" --db "$db" --quiet >/dev/null 2>&1 || { echo "cannot build the fixture cache" >&2; exit 2; }
  fi
  mkdir -p "$(dirname "$1")"
  cp "$db" "$1"
}

# The folder's entries, one per line: "path/" for folders, "path@ -> target" for links,
# "path SIZE sha1 [db]" for files ("db": a *.db or an SQLite file, whose sha1 is shown).
snapshot() {
  (cd "$S" && find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort | while IFS= read -r p; do
    if [[ -L $p ]]; then echo "$p@ -> $(readlink "$p")"
    elif [[ -d $p ]]; then echo "$p/"
    else
      local db=""
      [[ $p == *.db || $(head -c 15 "$p") == "SQLite format 3" ]] && db=" db"
      echo "$p $(stat -c %s "$p") $(sha1sum <"$p" | cut -c1-8)$db"
    fi
  done)
}

# The snapshot for the table: files and links only, sha1 only for caches.
show_files() {
  local out="" line name rest
  while IFS= read -r line; do
    [[ -z $line || $line == */ ]] && continue
    name=${line%% *}
    if [[ $line == *@* ]]; then out+="${out:+, }${line/ -> /->}"; continue; fi
    rest=${line#* }
    if [[ $line == *" db" ]]; then rest=${rest% db}; out+="${out:+, }$name ${rest% *} ${rest#* }"
    else out+="${out:+, }$name ${rest% *}"; fi
  done <<<"$1"
  echo "${out:-(none)}"
}

# Markdown cell: no pipes, no newlines.
cell() { local s=${1//|/\\|}; s=${s//$'\n'/ }; printf '%s' "$s"; }
cut90() { local s=$1; ((${#s} > 90)) && s="${s:0:87}..."; printf '%s' "$s"; }

N=0
PASSED=0
FAILED=0
FAILED_LIST=()

# Start a case: a fresh scratch folder $S (the current directory) with an empty home/.
new_case() {
  S=$(mktemp -d)
  SCRATCH+=("$S")
  mkdir "$S/home"
  cd "$S" || exit 2
  STDIN=/dev/null
  MSG_RE=""
  NOT_RE=""
  JSON_CHECK=0
  NOTE=""
}

# run ITEM EXPECTED_EXIT FILES "DISPLAY" COMMAND...
#   FILES: "same", or "+a,+b/c" (these appear; the rest unchanged)
#   before the call: STDIN (file), MSG_RE (the message must match, grep -E), NOT_RE (stdout
#   and stderr must not match),
#   JSON_CHECK=1 (stdout must be one JSON object whose exit_code is the exit code).
run() {
  local item=$1 expect=$2 files=$3 display=$4
  shift 4
  local before after rc msg ok=1 why=""
  before=$(snapshot)
  env -u TOPK_TUNE_DB -u XDG_CACHE_HOME HOME="$S/home" "$@" <"$STDIN" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  after=$(snapshot)
  if [[ $JSON_CHECK == 1 ]] || grep -q -- '--json' <<<"$display"; then
    msg=$(jq -r 'if .ok then "ok: true, exit_code \(.exit_code)" else .error end' "$WORK/out" 2>/dev/null | head -1)
  else
    msg=$(head -1 "$WORK/err")
    [[ -z $msg ]] && msg="(stdout) $(head -1 "$WORK/out")"
  fi
  msg=${msg#topk-tune: error: }
  msg=${msg//$S/\$S}

  [[ $rc == "$expect" ]] || { ok=0; why+=" exit $rc, expected $expect;"; }
  if [[ $files == same ]]; then
    [[ $after == "$before" ]] || { ok=0; why+=" files changed;"; }
  else
    local want=() p l rest=""
    IFS=, read -ra want <<<"$files"
    for p in "${want[@]}"; do
      p=${p#+}
      grep -q -- "^$p \|^$p@" <<<"$after" || { ok=0; why+=" $p not created;"; }
    done
    # every entry of after that is neither new nor a folder of a new file must be in before
    while IFS= read -r l; do
      [[ -z $l ]] && continue
      local new=0
      for p in "${want[@]}"; do
        p=${p#+}
        [[ $l == "$p "* || $l == "$p@"* ]] && new=1
        [[ $l == */ && $p == "$l"* ]] && ! grep -Fxq -- "$l" <<<"$before" && new=1
      done
      ((new)) || rest+="$l"$'\n'
    done <<<"$after"
    [[ ${rest%$'\n'} == "$before" ]] || { ok=0; why+=" other files changed;"; }
  fi
  if [[ -n $MSG_RE ]] && ! grep -Eq -- "$MSG_RE" <<<"$msg"; then ok=0; why+=" message does not match /$MSG_RE/;"; fi
  if [[ -n $NOT_RE ]] && grep -Eq -- "$NOT_RE" "$WORK/err" "$WORK/out"; then ok=0; why+=" output matches /$NOT_RE/;"; fi
  if [[ $JSON_CHECK == 1 ]]; then
    local objs code
    objs=$(jq -s 'length' "$WORK/out" 2>/dev/null)
    code=$(jq -r '.exit_code' "$WORK/out" 2>/dev/null)
    [[ $objs == 1 && $code == "$rc" ]] || { ok=0; why+=" stdout is not one JSON object with exit_code $rc;"; }
  fi

  N=$((N + 1))
  local b a
  b=$(show_files "$before")
  if [[ $after == "$before" ]]; then a="unchanged"; else a=$(show_files "$after"); fi
  if ((ok)); then PASSED=$((PASSED + 1)); else
    FAILED=$((FAILED + 1)); FAILED_LIST+=("#$N $item:$why"); a+=" **FAILED:$why**"; fi
  # shellcheck disable=SC2016  # the backquotes are Markdown
  printf '| %s | %s | `%s` | %s | %s | %s -> %s |\n' "$N" "$(cell "$item")" "$(cell "$display")" "$rc" \
    "$(cell "$NOTE$(cut90 "$msg")")" "$(cell "$b")" "$(cell "$a")"
  cd "$WORK" || exit 2
}

T="topk-tune"
echo "# Hostile inputs to topk-tune (no GPU)"
echo
echo "binary: \`$(basename "$BIN")\`, $("$BIN" --version 2>/dev/null | head -1)"
echo
echo "| # | item | input (command) | exit | message | files before -> after |"
echo "| --- | --- | --- | --- | --- | --- |"

# ---- 1. an output that is the cache itself
new_case; make_cache tuning.db
MSG_RE="tuning cache"
run "1 export over the cache" 2 same "$T export --db tuning.db --out tuning.db" "$BIN" export --db tuning.db --out tuning.db

new_case; make_cache tuning.db; ln -s tuning.db link.db
MSG_RE="tuning cache"
run "1 export over a symlink to it" 2 same "$T export --db tuning.db --out link.db" "$BIN" export --db tuning.db --out link.db

new_case; make_cache tuning.db; ln tuning.db hard.db
MSG_RE="tuning cache"
run "1 export over a hard link to it" 2 same "$T export --db tuning.db --out hard.db" "$BIN" export --db tuning.db --out hard.db

new_case; make_cache tuning.db
run "1 report --out is the cache file" 2 same "$T report --db tuning.db --out tuning.db" "$BIN" report --db tuning.db --out tuning.db

new_case; make_cache out/report.json
MSG_RE="tuning cache"
run "1 report file is the cache" 2 same "$T report --db out/report.json --out out" "$BIN" report --db out/report.json --out out

new_case; make_cache tuning.db; mkdir out; ln -s ../tuning.db out/report.md
MSG_RE="tuning cache"
run "1 report file links to the cache" 2 same "$T report --db tuning.db --out out  (out/report.md -> ../tuning.db)" "$BIN" report --db tuning.db --out out

# ---- 2. read-only deployments
ro_case() {  # a cache in ro/ (mode 555), owned by nobody when root; jsonl/report outputs go to w/
  new_case; make_cache ro/tuning.db; mkdir w
  chmod 755 "$S" "$S/home"
  [[ ${#AS_USER[@]} -gt 0 ]] && chown -R 65534:65534 "$S/w" "$S/home"
  chmod 555 "$S/ro"
  NOTE=$AS_NOTE
}
ro_case; run "2 show, read-only folder" 0 same "$T show --db ro/tuning.db  (ro/ mode 555)" "${AS_USER[@]}" "$BIN" show --db ro/tuning.db
ro_case; run "2 report, read-only folder" 0 "+w/r/report.html,+w/r/report.md,+w/r/report.json" "$T report --db ro/tuning.db --out w/r" "${AS_USER[@]}" "$BIN" report --db ro/tuning.db --out w/r
ro_case; run "2 export, read-only folder" 0 "+w/x.jsonl" "$T export --db ro/tuning.db --out w/x.jsonl" "${AS_USER[@]}" "$BIN" export --db ro/tuning.db --out w/x.jsonl
ro_case; run "2 verify, read-only folder (no GPU)" 3 same "$T verify --db ro/tuning.db" "${AS_USER[@]}" "$BIN" verify --db ro/tuning.db

new_case; make_cache tuning.db; chmod 444 tuning.db
chmod 755 "$S"; [[ ${#AS_USER[@]} -gt 0 ]] && chown -R 65534:65534 "$S"
NOTE=$AS_NOTE
run "2 show, read-only file (0444)" 0 same "$T show --db tuning.db  (file mode 444, folder writable)" "${AS_USER[@]}" "$BIN" show --db tuning.db

# ---- 3. where the cache goes
new_case; write_jsonl x.jsonl
MSG_RE="memory"
run "3 :memory: cache refused" 2 same "TOPK_TUNE_DB=:memory: $T import x.jsonl" env TOPK_TUNE_DB=:memory: "$BIN" import x.jsonl

new_case; write_jsonl x.jsonl
MSG_RE="HOME"
run "3 no HOME, no --db" 2 same "env -u HOME $T import x.jsonl" env -u HOME "$BIN" import x.jsonl

new_case; write_jsonl x.jsonl
run "3 relative XDG_CACHE_HOME ignored" 0 "+home/.cache/topk-tune/tuning.db" "HOME=\$S/home XDG_CACHE_HOME=relative/cache $T import x.jsonl" env XDG_CACHE_HOME=relative/cache "$BIN" import x.jsonl

# ---- 4. bounded shape files
new_case
MSG_RE="regular file"
run "4 shape file /dev/zero" 2 same "$T tune --shapes /dev/zero --db t.db" "$BIN" tune --shapes /dev/zero --db t.db

new_case; echo '{"l2mode":"hot","shapes":[{"dtype":"f32","batch":1,"n":256,"k":8}]}' >s.json
MSG_RE="l2mode"
run "4 unknown top-level key" 2 same "$T tune --shapes s.json --db t.db  ({\"l2mode\": ...})" "$BIN" tune --shapes s.json --db t.db

new_case
body='{"name":"pad","shapes":[{"dtype":"f32","batch":1,"n":256,"k":8}]}'
{ printf '%s' "$body"; head -c $((2 * 1024 * 1024 - ${#body})) /dev/zero | tr '\0' ' '; } >big.json
MSG_RE="limit"
run "4 2 MiB shape file" 2 same "$T tune --shapes big.json --db t.db  (2 MiB, valid JSON)" "$BIN" tune --shapes big.json --db t.db

# ---- 5. implausible imported rows (the cache must stay as it was)
import_case() {  # import_case ITEM DISPLAY SED REASON (the reason the message must give)
  new_case; make_cache tuning.db; write_jsonl x.jsonl
  sed -i "/\"table\":\"winners\"/ s/$3" x.jsonl
  MSG_RE="x.jsonl:5: .*$4"
  run "$1" 2 same "$T import x.jsonl --db tuning.db  ($2)" "$BIN" import x.jsonl --db tuning.db
}
import_case "5 winner variant invalid (block 1000)" "variant warp_f32_b1000_i8_l1" \
  'warp_f32_b128_i8_l1/warp_f32_b1000_i8_l1/g' "block_threads 1000"
import_case "5 f32 winner on a bf16 shape" "problem bf16|..." 'f32|b64/bf16|b64/g' "variant is f32, problem is bf16"
import_case "5 winner median -5" "median_us -5" '"median_us":4.5/"median_us":-5/' "median_us -5 is not a plausible"
import_case "5 winner median 1e308" "median_us 1e308" '"median_us":4.5/"median_us":1e308/' "median_us 1e\\+308 is not a plausible"

# ---- 6. option values
new_case; MSG_RE="sm_999"
run "6 --arch sm_999" 2 same "$T space --shape f32:64x256:8 --arch sm_999" "$BIN" space --shape f32:64x256:8 --arch sm_999
new_case; MSG_RE="budget"
run "6 --budget nan" 2 same "$T tune --shape f32:64x256:8 --budget nan --db t.db" "$BIN" tune --shape f32:64x256:8 --budget nan --db t.db
new_case; MSG_RE="seed"
run "6 --seed -1" 2 same "$T tune --shape f32:64x256:8 --seed -1 --db t.db" "$BIN" tune --shape f32:64x256:8 --seed -1 --db t.db
new_case; MSG_RE="retime"
run "6 overflowing integer" 2 same "$T tune --shape f32:64x256:8 --retime 99999999999999999999 --db t.db" "$BIN" tune --shape f32:64x256:8 --retime 99999999999999999999 --db t.db
new_case; MSG_RE="device"
run "6 overflowing --device" 2 same "$T tune --shape f32:64x256:8 --device 4294967297 --db t.db" "$BIN" tune --shape f32:64x256:8 --device 4294967297 --db t.db
new_case; MSG_RE="limit"
run "6 --limit -5" 2 same "$T space --shape f32:64x256:8 --limit -5" "$BIN" space --shape f32:64x256:8 --limit -5
new_case; MSG_RE="16384"
run "6 sorted k > 16384" 2 same "$T tune --shape f32:64x65536:20000:sorted --db t.db" "$BIN" tune --shape f32:64x65536:20000:sorted --db t.db
new_case; MSG_RE="contradict"
run "6 :smallest:largest" 2 same "$T space --shape f32:64x256:8:smallest:largest" "$BIN" space --shape f32:64x256:8:smallest:largest
new_case
run "6 dtype F32" 0 same "$T space --shape F32:64x256:8 --limit 1" "$BIN" space --shape F32:64x256:8 --limit 1
new_case
run "6 dtype float32" 0 same "$T space --shape float32:64x256:8 --limit 1" "$BIN" space --shape float32:64x256:8 --limit 1

# ---- 7. messages
big=$(printf '9%.0s' $(seq 310))
new_case; MSG_RE="\\.\\.\\."; NOT_RE="9{100}"
run "7 310-digit K is cut (no 100 digits in a row)" 2 same "$T space --shape f32:64x256:<310 nines>" "$BIN" space --shape "f32:64x256:$big"
new_case; MSG_RE="seed"; NOT_RE="9{100}"
run "7 310-digit --seed: range error is cut" 2 same "$T tune --shape f32:64x256:8 --seed <310 nines> --db t.db" "$BIN" tune --shape f32:64x256:8 --seed "$big" --db t.db
new_case; : >empty.json; MSG_RE="empty"
run "7 empty shape file named empty" 2 same "$T tune --shapes empty.json --db t.db  (0 bytes)" "$BIN" tune --shapes empty.json --db t.db
new_case; MSG_RE="nothere.json.*(not exist|missing)"
run "7 missing shape file named missing" 2 same "$T tune --shapes nothere.json --db t.db" "$BIN" tune --shapes nothere.json --db t.db
new_case; make_cache tuning.db; MSG_RE="nope"
run "7 show unknown fingerprint" 2 same "$T show --db tuning.db --device-fingerprint nope" "$BIN" show --db tuning.db --device-fingerprint nope
new_case; make_cache tuning.db; MSG_RE="nope"
run "7 report unknown fingerprint" 2 same "$T report --db tuning.db --device-fingerprint nope --out r" "$BIN" report --db tuning.db --device-fingerprint nope --out r
new_case; : >empty.db; MSG_RE="empty"
run "7 empty cache file named empty" 4 same "$T show --db empty.db  (0 bytes)" "$BIN" show --db empty.db

# ---- 8. --json and stdin/stdout
new_case; JSON_CHECK=1
run "8 --json usage error" 2 same "$T --json frobnicate" "$BIN" --json frobnicate
new_case; JSON_CHECK=1
run "8 --json tune without a GPU" 3 same "$T --json tune --shape f32:64x256:8 --db t.db" "$BIN" --json tune --shape f32:64x256:8 --db t.db
new_case; JSON_CHECK=1
run "8 --json success" 0 same "$T --json space --shape f32:64x256:8 --limit 1" "$BIN" --json space --shape f32:64x256:8 --limit 1
new_case; make_cache tuning.db; JSON_CHECK=1
run "8 --json with export --out -" 2 same "$T --json export --db tuning.db --out -" "$BIN" --json export --db tuning.db --out -
new_case; make_cache tuning.db; MSG_RE="stdout"
run "8 export --out - to stdout" 0 same "$T export --db tuning.db --out -" "$BIN" export --db tuning.db --out -
if [[ $(head -1 "$WORK/out" | jq -r .table 2>/dev/null) != meta ]]; then echo "<!-- export --out -: stdout does not start with the meta row -->"; fi
new_case; write_jsonl x.jsonl; STDIN=$S/x.jsonl
run "8 import - from stdin" 0 "+new.db" "$T import - --db new.db < x.jsonl" "$BIN" import - --db new.db

# ---- 9. no GPU (the SIGINT case, exit 130, needs a GPU run)
new_case; MSG_RE="GPU"
run "9 tune without a GPU" 3 same "$T tune --shape f32:64x256:8 --db t.db" "$BIN" tune --shape f32:64x256:8 --db t.db

echo
if ((FAILED)); then
  echo "Failed:"
  echo
  for f in "${FAILED_LIST[@]}"; do echo "- $(cell "$f")"; done
  echo
fi
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
