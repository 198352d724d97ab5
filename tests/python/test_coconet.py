"""The Python module `coconet` (python/module.cpp) against the `coconet` command.

Each of predict, tune, simulate and collective must return exactly the points
(collective: the rows) that `coconet <command> --format json` prints for the
same arguments; bad input raises ValueError with the message the command
prints after "coconet: error: "; the loaders resolve names and paths as the
command does; the README's one-liner and the example script run.

Environment (tests/python.cmake): PYTHONPATH holds the built module,
COCONET_BINARY the command, COCONET_ROOT the repository, COCONET_EXAMPLE
python/examples/sizes.py.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import coconet

BINARY = os.environ["COCONET_BINARY"]
ROOT = os.environ["COCONET_ROOT"]
EXAMPLE = os.environ["COCONET_EXAMPLE"]


def cli(*args):
    """The command's exit code, stdout and stderr."""
    r = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def cli_json(*args):
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def cli_error(*args):
    """The message of a command that fails with bad input (exit 2)."""
    code, _, err = cli(*args)
    assert code == 2, (code, err)
    prefix = "coconet: error: "
    assert err.startswith(prefix), err
    return err[len(prefix):].rstrip("\n")


class SameAsTheCommand(unittest.TestCase):
    def test_predict(self):
        want = cli_json("predict", "adam", "--topology", "dgx-h100")
        self.assertEqual(want["schema"], "coconet.predict/1")
        self.assertEqual(coconet.predict("adam", topology="dgx-h100"), want["points"])

    def test_predict_every_flag(self):
        want = cli_json("predict", "adam", "--topology", "dgx-a100", "--nodes", "2", "--ranks", "8",
                        "--set", "N=1M", "--set", "lr=0.1", "--set", "network.nic_Gbps=200", "--backend", "cpu")
        got = coconet.predict("adam", topology="dgx-a100", nodes=2, ranks=8,
                              sets={"N": "1M", "lr": 0.1, "network.nic_Gbps": 200}, backend="cpu")
        self.assertEqual(got, want["points"])
        # sets as the command's strings, and a path for the target
        path = os.path.join(ROOT, "workloads", "adam.yaml")
        self.assertEqual(coconet.predict(path, topology="dgx-a100", nodes=2, ranks=8,
                                         sets=["N=1M", "lr=0.1", "network.nic_Gbps=200"], backend="cpu"),
                         want["points"])

    def test_predict_default_experiment(self):
        self.assertEqual(coconet.predict(), cli_json("predict")["points"])

    def test_tune_and_its_file(self):
        with tempfile.TemporaryDirectory() as d:
            mine, theirs = os.path.join(d, "mine.yaml"), os.path.join(d, "theirs.yaml")
            want = cli_json("tune", "sgd", "--topology", "dgx-h200", "--out", theirs)
            self.assertEqual(coconet.tune("sgd", topology="dgx-h200", out=mine), want["points"])
            with open(mine) as a, open(theirs) as b:
                self.assertEqual(a.read(), b.read())

    def test_simulate(self):
        want = cli_json("simulate", "adam", "--schedule", "fuse(RS-C-AG)", "--set", "N=4M")
        self.assertEqual(coconet.simulate("adam", "fuse(RS-C-AG)", sets={"N": "4M"}), want["points"])
        want = cli_json("simulate", "default", "--schedule", "AR-C", "--chunks", "2", "--algo", "ring")
        self.assertEqual(coconet.simulate("default", "AR-C", chunks=2, algo="ring"), want["points"])

    def test_simulate_and_predict_name_the_same_backend(self):
        # Neither asks for one: both say the backend the topology's device runs (cuda on dgx-h100, cpu on cpu-local).
        for topology, backend in (("dgx-h100", "cuda"), ("cpu-local", "cpu")):
            predicted = coconet.predict("adam", topology=topology, sets={"N": "4M"})
            simulated = coconet.simulate("adam", "AR-C", topology=topology, sets={"N": "4M"})
            self.assertEqual([p["backend"] for p in predicted], [backend])
            self.assertEqual([p["backend"] for p in simulated], [backend])

    def test_collective(self):
        want = cli_json("collective", "--op", "allgather", "--topology", "dgx-h100", "--nodes", "2",
                        "-b", "1K", "-e", "1M", "-f", "4", "--proto", "simple")
        got = coconet.collective("allgather", topology="dgx-h100", nodes=2, minbytes="1K", maxbytes=1 << 20,
                                 stepfactor=4, proto="simple")
        self.assertEqual(got, want["rows"])

    def test_step(self):
        want = cli_json("step", "llama3-70b", "--topology", "dgx-h100", "--nodes", "32")
        self.assertEqual(coconet.step("llama3-70b", topology="dgx-h100", nodes=32), want)
        want = cli_json("step", "megatron-1.7b", "--topology", "dgx-a100", "--nodes", "4", "--search", "--top", "2",
                        "--set", "training.global_batch=256")
        got = coconet.step("megatron-1.7b", topology="dgx-a100", nodes=4, search=True, top=2,
                           sets={"training.global_batch": 256})
        self.assertEqual(got, want)
        self.assertEqual(len(got["layouts"]), 2)

    def test_compare(self):
        want = cli_json("compare", "llama3-70b", "-t", "dgx-h100", "-t", "dgx-a100", "-N", "32")
        self.assertEqual(coconet.compare("llama3-70b", topologies=["dgx-h100", "dgx-a100"], nodes=32), want)
        want = cli_json("compare", "adam", "--set", "N=4096", "-t", "dgx-h100", "-N", "1", "-N", "2")
        self.assertEqual(coconet.compare("adam", topologies="dgx-h100", nodes=[1, 2], sets={"N": 4096}), want)


class Errors(unittest.TestCase):
    def check(self, call, *args):
        with self.assertRaises(ValueError) as e:
            call()
        self.assertEqual(str(e.exception), cli_error(*args))

    def test_unknown_target(self):
        self.check(lambda: coconet.predict("nosuch"), "predict", "nosuch")

    def test_unknown_schedule(self):
        self.check(lambda: coconet.simulate("adam", "nosuch"), "simulate", "adam", "--schedule", "nosuch")

    def test_bad_size(self):
        self.check(lambda: coconet.predict("adam", sets={"N": "abc"}), "predict", "adam", "--set", "N=abc")

    def test_bad_topology(self):
        self.check(lambda: coconet.tune("adam", topology="nosuch"), "tune", "adam", "--topology", "nosuch")

    def test_bad_collective_range(self):
        self.check(lambda: coconet.collective(minbytes="1M", maxbytes="1K"), "collective", "-b", "1M", "-e", "1K")

    def test_nul_in_a_path(self):
        # issue 34 row 9: the C library stops at the NUL; Python's open() refuses it, and so does coconet.
        with tempfile.TemporaryDirectory() as d:
            target = os.path.join(d, "x.yaml")
            with self.assertRaisesRegex(ValueError, "^out: embedded null byte"):
                coconet.tune("adam", topology="cpu-local", sets={"N": 4096}, out=target + "\x00.evil")
            self.assertFalse(os.path.exists(target))
        with self.assertRaisesRegex(ValueError, "^target: embedded null byte"):
            coconet.predict("adam\x00x")

    def test_bad_counts(self):
        with self.assertRaisesRegex(ValueError, "^nodes: needs a whole number of at least 1, got 0$"):
            coconet.predict("adam", nodes=0)
        with self.assertRaisesRegex(ValueError, "^ranks: needs a whole number of at least 1, got -2$"):
            coconet.predict("adam", ranks=-2)


class Loaders(unittest.TestCase):
    def test_workload(self):
        w = coconet.load_workload("adam", sets={"N": 4096})
        self.assertEqual(w["workload"], "adam")
        self.assertEqual(w["sizes"], {"N": 4096})
        self.assertIn("AR-C", w["schedules"])
        self.assertEqual(coconet.load_workload(w["path"])["workload"], "adam")
        with self.assertRaisesRegex(ValueError, "unknown workload"):
            coconet.load_workload("nosuch")

    def test_topology(self):
        t = coconet.load_topology("dgx-h100", sets={"nodes": 2})
        self.assertEqual((t["name"], t["nodes"], t["total_gpus"]), ("dgx-h100", 2, 16))
        self.assertEqual(coconet.load_topology(t["path"])["name"], "dgx-h100")

    def test_experiment(self):
        default = coconet.load_experiment()
        self.assertGreater(len(default["workloads"]), 1)
        self.assertEqual(coconet.load_experiment("default")["workloads"], default["workloads"])
        self.assertEqual(len(coconet.load_experiment("adam")["workloads"]), 1)

    def test_names(self):
        self.assertEqual(coconet.names(), {k: v for k, v in cli_json("list").items() if k != "schema"})


class Scripts(unittest.TestCase):
    def test_readme_one_liner(self):
        r = subprocess.run([sys.executable, "-c",
                            "import coconet; print(coconet.predict('adam', topology='dgx-h100')[0])"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("'workload': 'adam'", r.stdout)

    def test_example(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "sizes.png")
            r = subprocess.run([sys.executable, EXAMPLE, "adam", "--values", "1M,4M", "--out", out],
                               capture_output=True, text=True, timeout=300, env={**os.environ, "MPLBACKEND": "Agg"})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("N=1048576", r.stdout)
            self.assertIn("fuse(RS-C-AG)", r.stdout)
            try:
                import matplotlib  # noqa: F401
                self.assertTrue(os.path.exists(out))
            except ImportError:
                self.assertIn("matplotlib is not installed", r.stderr)

    def test_example_bad_size(self):
        r = subprocess.run([sys.executable, EXAMPLE, "adam", "--values", "abc"], capture_output=True, text=True,
                           timeout=300)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("sizes.py: --set N=abc", r.stderr)


if __name__ == "__main__":
    unittest.main()
