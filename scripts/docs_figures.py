#!/usr/bin/env python3
"""The figures the README and docs/ quote, taken from the tool itself.

Two kinds of marked places in README.md and docs/*.md:

- an output block: an HTML comment line `<!-- coconet-output: ARGS -->` right
  above a fenced block; the block holds `$ coconet ARGS` and what
  `coconet ARGS` prints on stdout, verbatim.
- an inline figure: `<!--fig:ID-->TEXT<!--/fig-->`, where ID names an entry of
  FIGURES below (the command it comes from and how the text is read from its
  output).

Usage:
  docs_figures.py --coconet BUILD/cli/coconet --write   rewrite every marked place (make docs)
  docs_figures.py --coconet BUILD/cli/coconet --check   exit 1, naming each place whose text
                                                        differs from the tool's output (ctest docs.figures)

Only figures the model computes are marked: they depend on the code and the
shipped files, never on the machine the script runs on (measured times and
counts of a calibration are not).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def documents(root):
    """README.md and docs/*.md of `root`, relative to it."""
    docs = os.path.join(root, "docs")
    return ["README.md"] + sorted(
        os.path.join("docs", f) for f in (os.listdir(docs) if os.path.isdir(docs) else []) if f.endswith(".md"))

OUTPUT_MARK = re.compile(r"^<!-- coconet-output: (.+?) -->\s*$")
INLINE = re.compile(r"<!--fig:([A-Za-z0-9_.-]+)-->(.*?)<!--/fig-->")


class Tool:
    """Runs coconet once per distinct command, from the repository's data root."""

    def __init__(self, binary):
        self.binary = binary
        self.cache = {}
        self.env = dict(os.environ, COCONET_ROOT=ROOT)

    def stdout(self, args):
        key = tuple(args)
        if key not in self.cache:
            r = subprocess.run([self.binary, *args], capture_output=True, text=True, env=self.env, timeout=600)
            if r.returncode != 0:
                sys.exit(f"docs_figures: `coconet {' '.join(args)}` failed ({r.returncode}):\n{r.stderr}")
            self.cache[key] = r.stdout
        return self.cache[key]

    def reference_rows(self):
        """The rows of `coconet validate --reference` (results.json): the model against published figures."""
        if "reference" not in self.cache:
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "report")
                self.stdout(["validate", "--reference", "--out", out, "--format", "json"])
                with open(os.path.join(out, "results.json")) as f:
                    self.cache["reference"] = json.load(f)["rows"]
        return self.cache["reference"]


def reference_tflops(model):
    """The predicted TFLOP/s per GPU of a SC'21 Table 1 row, to one decimal, as validate --reference prints it."""
    def read(tool):
        for row in tool.reference_rows():
            if row["workload"] == f"training step: {model}":
                m = re.search(r"predicted ([0-9.]+) TFLOP/s per GPU", row["source"])
                if m:
                    return m.group(1)
        sys.exit(f"docs_figures: no reference row for {model}")
    return read


def reference_error(model):
    """Its TFLOP/s error against the published figure, signed, to one decimal (-5.7%): the rate goes as
    1 / step time, so the error is the published step time over the predicted one, less 1."""
    def read(tool):
        for row in tool.reference_rows():
            if row["workload"] == f"training step: {model}":
                return f"{100 * (row['measured_us']['median'] / row['predicted_us'] - 1):+.1f}%"
        sys.exit(f"docs_figures: no reference row for {model}")
    return read


# Inline figures: ID -> a function of the tool giving the text.
FIGURES = {
    "ref.megatron-1.7b.tflops": reference_tflops("megatron-1.7b"),
    "ref.megatron-7.5b.tflops": reference_tflops("megatron-7.5b"),
    "ref.megatron-1008b.tflops": reference_tflops("megatron-1008b"),
    "ref.megatron-1.7b.error": reference_error("megatron-1.7b"),
    "ref.megatron-7.5b.error": reference_error("megatron-7.5b"),
    "ref.megatron-1008b.error": reference_error("megatron-1008b"),
}


def output_block(tool, args_text):
    args = shlex.split(args_text)
    return [f"$ coconet {args_text}"] + tool.stdout(args).rstrip("\n").split("\n")


def figures_of(path, text, tool):
    """The file's text with every marked place as the tool has it, and the places that differed."""
    lines = text.split("\n")
    out, stale = [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = OUTPUT_MARK.match(line)
        if m and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            end = i + 2
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                sys.exit(f"docs_figures: {path}:{i + 1}: the block after the marker is not closed")
            want = output_block(tool, m.group(1))
            have = lines[i + 2:end]
            if have != want:
                stale.append(f"{path}:{i + 3}: the output of `coconet {m.group(1)}` differs")
            out += [line, lines[i + 1]] + want + [lines[end]]
            i = end + 1
            continue
        if m:
            sys.exit(f"docs_figures: {path}:{i + 1}: a coconet-output marker must stand right above a fenced block")

        def replace(fig, lineno=i + 1):
            ident, have = fig.group(1), fig.group(2)
            if ident not in FIGURES:
                sys.exit(f"docs_figures: {path}:{lineno}: unknown figure '{ident}' (known: {', '.join(FIGURES)})")
            want = FIGURES[ident](tool)
            if have != want:
                stale.append(f"{path}:{lineno}: figure {ident} says {have}, the tool prints {want}")
            return f"<!--fig:{ident}-->{want}<!--/fig-->"

        out.append(INLINE.sub(replace, line))
        i += 1
    return "\n".join(out), stale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--coconet", required=True, help="the built coconet command")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the marked places")
    mode.add_argument("--check", action="store_true", help="fail when a marked place differs")
    ap.add_argument("--root", default=ROOT, help="the checkout whose README and docs are read (default: this one)")
    a = ap.parse_args()
    tool = Tool(a.coconet)
    all_stale, places = [], 0
    for rel in documents(a.root):
        path = os.path.join(a.root, rel)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            text = f.read()
        places += len(INLINE.findall(text)) + sum(1 for l in text.split("\n") if OUTPUT_MARK.match(l))
        new, stale = figures_of(rel, text, tool)
        all_stale += stale
        if a.write and new != text:
            with open(path, "w") as f:
                f.write(new)
    if places == 0:
        sys.exit("docs_figures: no marked figure found: the markers were lost")
    if a.check and all_stale:
        print("documented figures that no longer match the tool (run `make docs`):", file=sys.stderr)
        for s in all_stale:
            print("  " + s, file=sys.stderr)
        return 1
    print(f"docs_figures: {places} marked place(s), {len(all_stale)} {'rewritten' if a.write else 'stale'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
