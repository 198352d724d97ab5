// coconet collective: the cost model's nccl-tests. One row per message size
// (-b to -e, times -f) with the predicted time, algbw, busbw, and the algorithm
// and protocol that produce it (NCCL's choice under `auto`). The sweep and its
// JSON are results.h's (collective_sweep); this file adds the flags and printing.
#include <cstdint>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "cli/results.h"

namespace coconet::cli {

namespace {

struct Args {
  CollectiveArgs sweep;
  Format format = Format::table;
};

void run(const Args& a) {
  const CollectiveSweep s = collective_sweep(a.sweep);
  if (a.format == Format::json) {
    print_json(collective_json(s));
    return;
  }
  if (a.format == Format::table)
    fmt::print("# {} on {}: {} ranks ({} node(s) x {} GPUs), predicted\n", s.op, s.topology, s.where.ranks,
               s.where.nodes, s.where.per_node);
  print(s.table, a.format);
}

}  // namespace

void register_collective(CLI::App& app) {
  auto* cmd = app.add_subcommand("collective", "Predict a collective over a size sweep, the way nccl-tests measures it");
  auto a = std::make_shared<Args>();
  cmd->add_option("--op", a->sweep.op, "allreduce, reducescatter, allgather, broadcast, reduce, send or alltoall")->capture_default_str();
  cmd->add_option("--topology,-t", a->sweep.topology, "Topology name (configs/topologies/) or YAML file")->capture_default_str();
  cmd->add_option("--nodes,-N", a->sweep.nodes, "Nodes (default: the topology's)")->check(at_least(1));
  cmd->add_option("--gpus,-g", a->sweep.gpus, "GPUs per node taking part (default: all of the node's)");
  cmd->add_option("-b,--minbytes", a->sweep.begin, "Smallest size (K, M, G suffixes: powers of 1024)")->capture_default_str();
  cmd->add_option("-e,--maxbytes", a->sweep.end, "Largest size")->capture_default_str();
  cmd->add_option("-f,--stepfactor", a->sweep.factor, "Size multiplier between rows")->capture_default_str();
  cmd->add_option("--algo", a->sweep.algo, "ring, tree, nvls, hierarchical or auto (NCCL's choice)")->capture_default_str();
  cmd->add_option("--proto", a->sweep.proto, "ll, ll128, simple or auto")->capture_default_str();
  cmd->add_option("--channels", a->sweep.channels, "NCCL channels (0: the topology's default)")->capture_default_str();
  cmd->add_option("--set", a->sweep.sets, "Override a topology value: KEY=VALUE, e.g. network.nic_Gbps=200 (repeatable)");
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
