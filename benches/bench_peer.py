# Times the early (v3.3.0) zen-mcp-server collector as its own code runs it:
# expand_paths + read_files on a folder under a token budget. Usage: bench_peer.py DIR BUDGET RUNS
import os, sys, time, statistics
root = sys.argv[1]; budget = int(sys.argv[2]); runs = int(sys.argv[3])
os.environ["MCP_PROJECT_ROOT"] = os.path.dirname(root.rstrip("/"))
sys.path.insert(0, os.path.dirname(__file__))
from utils import file_utils
from utils.file_utils import expand_paths, read_files
exp, rd = [], []
for _ in range(runs):
    t0 = time.perf_counter(); files = expand_paths([root]); t1 = time.perf_counter()
    out = read_files([root], max_tokens=budget, reserve_tokens=0); t2 = time.perf_counter()
    exp.append(t1 - t0); rd.append(t2 - t1)
included = out.count("--- BEGIN FILE:")
print(f"files={len(files)} included={included} skipped={len(files)-included} "
      f"expand_median_ms={statistics.median(exp)*1e3:.1f} read_median_ms={statistics.median(rd)*1e3:.1f} "
      f"read_min_ms={min(rd)*1e3:.1f} read_max_ms={max(rd)*1e3:.1f} total_median_ms={statistics.median([a+b for a,b in zip(exp,rd)])*1e3:.1f}")
