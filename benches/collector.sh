#!/bin/sh
# The collector benchmark as recorded in BENCHMARKS.md § Collector: one run of everything, so
# the figures are comparable. Needs the corpora described in benches/collector.rs, python3 (for
# the peer), hyperfine and GNU time.
#
#   sh benches/collector.sh [PEER_DIR]
#
# PEER_DIR holds the early (v3.3.0) zen-mcp-server collector: utils/file_utils.py and
# utils/token_utils.py from commit 22a3fb9, a config.py with MAX_CONTEXT_TOKENS, and
# bench_peer.py (a copy is benches/bench_peer.py); skipped if absent.
set -eu
PEER=${1:-/tmp/peer}
STDLIB=${BENCH_STDLIB:-/tmp/bench/stdlib}
TREE=${BENCH_TREE:-/tmp/bench/tree100k}

echo "## machine"; nproc; grep -m1 'model name' /proc/cpuinfo || true; uname -sr; uptime
cargo build --release --example collect --quiet
cargo bench --bench collector --no-run --quiet 2>/dev/null || true

if [ -f "$PEER/bench_peer.py" ]; then
  echo "## peer (zen-mcp-server v3.3.0 expand_paths + read_files), in-process, 15 runs"
  python3 "$PEER/bench_peer.py" "$STDLIB" 335544 15
fi

echo "## this collector, in-process (tokenizer loaded), 15 runs"
cargo bench --bench collector --quiet 2>/dev/null | grep '^|'

echo "## whole process (tokenizer load included)"
hyperfine --warmup 2 --runs 15 -N \
  "target/release/examples/collect $STDLIB 335544" \
  "target/release/examples/collect $TREE 1000000"
if [ -f "$PEER/bench_peer.py" ]; then
  hyperfine --warmup 1 --runs 10 -N "python3 $PEER/bench_peer.py $STDLIB 335544 1"
fi

echo "## peak RSS"
for args in "$STDLIB 335544" "$TREE 1000000"; do
  /usr/bin/time -v target/release/examples/collect $args 2>&1 | grep -E '^sent|Maximum resident'
done
