#!/usr/bin/env python3
"""scripts/gpu_check_summary.py on the reports of a healthy GPU machine and of
broken ones, written as googletest 1.12 writes --gtest_output=json (a test's
RecordProperty is a key of its test case; a skip has result SKIPPED).

A skip is expected only where the test declared it (the `expected_skip`
property of COCONET_EXPECTED_SKIP, tests/gpu/gpu_test_util.h): the by-design
skips of one GPU outside mpirun pass, any other skip fails.

  test_gpu_check_summary.py ROOT"""
import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else ".").resolve()
SUMMARY = ROOT / "scripts" / "gpu_check_summary.py"


def case(name, result="COMPLETED", expected_skip=None, failed=False):
    c = {"name": name, "status": "RUN", "result": result, "time": "0.1s", "classname": "x"}
    if expected_skip is not None:
        c["expected_skip"] = expected_skip
    if failed:
        c["failures"] = [{"failure": "a.cpp:1\nExpected equality", "type": ""}]
    return c


def report(suites):
    return {"tests": sum(len(c) for c in suites.values()),
            "testsuites": [{"name": s, "testsuite": cases} for s, cases in suites.items()]}


# What one healthy H200 outside mpirun reports: three skips by design.
HOST = {"CudaBackend": [case("NoGpuMeansAPlainUserError", "SKIPPED",
                             "a GPU is present (NVIDIA H200); the no-GPU path is not reachable"),
                        case("OfferedByTheFactory")]}
SMOKE = {"FusedProgramLsa": [case("EqualsTheInterpreterOnOneRank")],
         "GpuTest": [case("SingleKernelOverEveryRankUnderMpirun", "SKIPPED",
                          "not started by mpirun: one rank is covered above")]}
GPU = {"GpuData": [case("TheGpuTestsFindTheirFilesThroughTheDataRoot")],
       "Workloads/CudaRuntime": [case("EveryScheduleOfTheWorkloadVerifies/adam"),
                                 case("EveryScheduleOfTheWorkloadVerifies/gpt3_pipeline", "SKIPPED",
                                      "gpt3_pipeline spans 2 process groups; one rank runs one")]}
ROW = {"schedule": "AR", "predicted_us": 10.0, "median_us": 11.0, "verified": True,
       "checked_against": "program+interpreter"}
RUNS = {w: {"rows": [ROW]} for w in ("adam", "megatron_mlp")}
STEPS = ["closure", "preflight", "test_gpu_smoke", "test_gpu_host", "test_gpu", "bench_gpu", "out_files"]


def summarise(mode, host, gpu, smoke=None, runs=None, steps=None):
    with tempfile.TemporaryDirectory() as d:
        out, work = pathlib.Path(d, "out"), pathlib.Path(d, "work")
        out.mkdir()
        work.mkdir()
        (out / "test_gpu_host.json").write_text(json.dumps(report(host)))
        (out / "test_gpu.json").write_text(json.dumps(report(gpu)))
        if smoke is not None:
            (out / "test_gpu_smoke.json").write_text(json.dumps(report(smoke)))
        if runs is not None:
            (out / "runs.json").write_text(json.dumps(runs))
        (work / "steps.txt").write_text("".join(f"{s} {2 if s == 'preflight' and mode == 'dry_run' else 0}\n"
                                                for s in (steps or STEPS)))
        r = subprocess.run([sys.executable, str(SUMMARY), str(out), str(work), mode],
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout)


class Summary(unittest.TestCase):
    def test_a_healthy_gpu_passes_with_its_declared_skips(self):
        s = summarise("run", HOST, GPU, SMOKE, RUNS)
        self.assertEqual(s["status"], "pass", s)
        self.assertEqual(s["tests"]["host"]["expected_skips"], 1)
        self.assertEqual(s["tests"]["smoke"]["expected_skips"], 1)
        self.assertEqual(s["tests"]["gpu"]["expected_skips"], 1)
        self.assertIn("no-GPU path", s["tests"]["host"]["expected"]["CudaBackend.NoGpuMeansAPlainUserError"])

    def test_a_skip_the_test_did_not_declare_fails(self):
        gpu = {**GPU, "GpuTest": [case("TimersMeasureTheDeviceWork", "SKIPPED")]}  # "no GPU: ..."
        s = summarise("run", HOST, gpu, SMOKE, RUNS)
        self.assertEqual(s["status"], "fail")
        self.assertEqual(s["tests"]["gpu"]["unexpected_skips"], ["GpuTest.TimersMeasureTheDeviceWork"])

    def test_a_skip_by_name_alone_is_not_expected(self):
        # The old rule: a name with gpt3_pipeline in it. The property decides now.
        gpu = {"Workloads/CudaRuntime": [case("EveryScheduleOfTheWorkloadVerifies/gpt3_pipeline", "SKIPPED")]}
        self.assertEqual(summarise("run", HOST, gpu, SMOKE, RUNS)["status"], "fail")

    def test_a_failure_or_a_missing_smoke_report_fails(self):
        smoke = {"FusedProgramLsa": [case("EqualsTheInterpreterOnOneRank", failed=True)]}
        self.assertEqual(summarise("run", HOST, GPU, smoke, RUNS)["status"], "fail")
        self.assertEqual(summarise("run", HOST, GPU, None, RUNS)["status"], "fail")

    def test_the_tile_entry_says_whether_overlap_tile_passed(self):
        # Shown to fail: with the summary reading the suite from the GPU report, "not_run" both times.
        tile = {"TileGemm": [case("EqualsTheReferenceAndCublasExactlyOnIntegersInEveryDtype"),
                             case("TileSchedulesVerifyLikeTheirChunkSchedulesOnOneRank")]}
        self.assertEqual(summarise("run", HOST, GPU, {**SMOKE, **tile}, RUNS)["tile"], "pass")
        broken = {"TileGemm": [case("EqualsTheReferenceAndCublasExactlyOnIntegersInEveryDtype"),
                               case("TileSchedulesVerifyLikeTheirChunkSchedulesOnOneRank", failed=True)]}
        s = summarise("run", HOST, GPU, {**SMOKE, **broken}, RUNS)
        self.assertEqual(s["tile"], {"not_passed": ["TileSchedulesVerifyLikeTheirChunkSchedulesOnOneRank"]})
        self.assertEqual(s["status"], "fail")
        self.assertEqual(summarise("run", HOST, GPU, SMOKE, RUNS)["tile"], "not_run")

    def test_the_dry_run_needs_the_gpu_free_tests_to_pass(self):
        no_gpu_host = {"CudaBackend": [case("NoGpuMeansAPlainUserError"), case("OfferedByTheFactory")]}
        data = {"GpuData": [case("TheGpuTestsFindTheirFilesThroughTheDataRoot")]}
        steps = ["closure", "preflight", "test_gpu_host", "test_gpu_data", "bench_flags", "out_files"]
        self.assertEqual(summarise("dry_run", no_gpu_host, data, steps=steps)["status"], "dry_run_pass")
        broken = {"GpuData": [case("TheGpuTestsFindTheirFilesThroughTheDataRoot", failed=True)]}
        self.assertEqual(summarise("dry_run", no_gpu_host, broken, steps=steps)["status"], "dry_run_fail")
        self.assertEqual(summarise("dry_run", no_gpu_host, {}, steps=steps)["status"], "dry_run_fail")


if __name__ == "__main__":
    unittest.main(verbosity=2)
