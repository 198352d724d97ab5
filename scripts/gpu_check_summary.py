#!/usr/bin/env python3
"""Summary of scripts/gpu-check.sh: reads the files it left in OUT_DIR (gtest
and Google Benchmark JSON, coconet run/predict JSON, step exit codes) and
prints one JSON object; docs/gpu.md describes every field."""
import json
import pathlib
import sys

# The performance goals.
BANDWIDTH_GOAL = 0.90      # fused optimizer kernels vs device copy bandwidth, 64M+ elements
CHUNK_LOSS_GOAL = 0.05     # chunked GEMM (4-8 chunks) vs one GEMM
LARGE_SHARD = 1 << 26      # 64M elements


def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def steps(out):
    result = {}
    for line in (out / "steps.txt").read_text().splitlines():
        name, rc = line.split()
        result[name] = int(rc)
    return result


def tests(report):
    if report is None:
        return {"ran": False}
    summary = {"ran": True, "passed": 0, "failed": 0, "skipped": 0, "failures": []}
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f'{suite["name"]}.{case["name"]}'
            if case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                summary["skipped"] += 1
            elif case.get("failures"):
                summary["failed"] += 1
                summary["failures"].append(name)
            else:
                summary["passed"] += 1
    return summary


def benchmarks(report):
    rows = {}
    for b in (report or {}).get("benchmarks", []):
        name = b["name"].removesuffix("/manual_time")  # UseManualTime's suffix
        if b.get("error_occurred"):
            rows[name] = {"error": b.get("error_message", "")}
            continue
        rows[name] = {"real_time_us": b.get("real_time"),
                           "bytes_per_second": b.get("bytes_per_second"),
                           "flops": b.get("flops")}
    return rows


def rate(rows, name):
    row = rows.get(name, {})
    return row.get("bytes_per_second")


def time_us(rows, name):
    return rows.get(name, {}).get("real_time_us")


def performance(rows):
    copy = max(filter(None, [rate(rows, f"BM_CopyMemcpy/{LARGE_SHARD}"),
                             rate(rows, f"BM_CopyKernel/{LARGE_SHARD}")]), default=None)
    perf = {"copy_bandwidth_GBps": copy / 1e9 if copy else None, "kernels": {}}
    for kernel in ("BM_AdamFused", "BM_AdamUnfused", "BM_LambFused", "BM_FusedAdamLsa",
                   "BM_FusedAdamHost"):
        r = rate(rows, f"{kernel}/{LARGE_SHARD}")
        perf["kernels"][kernel] = {
            "GBps": r / 1e9 if r else None,
            "fraction_of_copy": r / copy if r and copy else None,
            "time_us": time_us(rows, f"{kernel}/{LARGE_SHARD}"),
        }
    fused = time_us(rows, f"BM_AdamFused/{LARGE_SHARD}")
    unfused = time_us(rows, f"BM_AdamUnfused/{LARGE_SHARD}")
    perf["adam_fused_speedup_over_unfused"] = unfused / fused if fused and unfused else None
    one = time_us(rows, "BM_MegatronGemm/chunks:1")
    perf["gemm"] = {}
    for c in (2, 4, 8):
        t = time_us(rows, f"BM_MegatronGemm/chunks:{c}")
        perf["gemm"][f"chunks_{c}_loss"] = t / one - 1 if t and one else None
    fractions = [perf["kernels"][k]["fraction_of_copy"] for k in ("BM_AdamFused", "BM_LambFused")]
    losses = [perf["gemm"][f"chunks_{c}_loss"] for c in (4, 8)]
    perf["goals"] = {
        "optimizer_bandwidth_ge_90pct": all(f is not None and f >= BANDWIDTH_GOAL for f in fractions),
        "chunked_gemm_loss_lt_5pct": all(x is not None and x < CHUNK_LOSS_GOAL for x in losses),
    }
    return perf


def predicted_vs_measured(out):
    rows = []
    for run_file in sorted(out.glob("run_*.json")):
        workload = run_file.stem[len("run_"):]
        measured = load(run_file)
        predicted = load(out / f"predict_{workload}.json")
        rows.append({"workload": workload, "measured": measured, "predicted": predicted})
    return rows


def main():
    out = pathlib.Path(sys.argv[1])
    st = steps(out)
    gpu = (out / "gpu.csv").read_text().strip() if (out / "gpu.csv").exists() else ""
    t_host = tests(load(out / "test_gpu_host.json"))
    t_gpu = tests(load(out / "test_gpu.json"))
    perf = performance(benchmarks(load(out / "bench_gpu.json")))
    correct = (st.get("test_gpu_host") == 0 and st.get("test_gpu") == 0 and
               t_gpu.get("ran") and t_gpu["failed"] == 0 and t_gpu["skipped"] == 0)
    runs_ok = all(rc == 0 for name, rc in st.items() if name.startswith("run_"))
    summary = {
        "status": "pass" if correct and runs_ok and st.get("bench_gpu") == 0 else "fail",
        "gpu": gpu,
        "steps": st,
        "tests": {"host": t_host, "gpu": t_gpu},
        "performance": perf,
        "predicted_vs_measured": predicted_vs_measured(out),
    }
    json.dump(summary, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
