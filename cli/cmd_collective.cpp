// coconet collective: the cost model's nccl-tests. One row per message size
// (-b to -e, times -f) with the predicted time, algbw, busbw, and the algorithm
// and protocol that produce it (NCCL's choice under `auto`).
#include <cstdint>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "model/error.h"
#include "model/assign.h"
#include "model/error.h"
#include "model/limits.h"
#include "sim/collective.h"
#include "sim/topology.h"

namespace coconet::cli {

namespace {

struct Args {
  std::string op = "allreduce";
  std::string topology = "dgx-h100";
  std::optional<int> nodes;
  std::optional<int> gpus;
  std::string begin = "8";
  std::string end = "8G";
  int factor = 2;
  std::string algo = "auto";
  std::string proto = "auto";
  int channels = 0;
  std::vector<std::string> sets;
  Format format = Format::table;
};

sim::Placement placement(const sim::Topology& t, const Args& a) {
  const int per_node = a.gpus.value_or(t.node.gpus);
  if (per_node < 1 || per_node > t.node.gpus)
    throw UserError(fmt::format("--gpus {}: a {} node has 1 to {} GPUs", per_node, t.name, t.node.gpus));
  sim::Placement p;
  p.nodes = t.nodes;
  p.per_node = per_node;
  p.ranks = t.nodes * per_node;
  p.send_crosses_nodes = t.nodes > 1;
  return p;
}

void run(const Args& a) {
  sim::Overrides sets;
  for (const auto& s : a.sets) sets.push_back(model::parse_assignment(s));
  if (a.nodes) sets.emplace_back("nodes", std::to_string(*a.nodes));
  const sim::Topology t = sim::load_topology(a.topology, sets);
  const sim::Placement where = placement(t, a);
  const std::int64_t b = model::parse_count(a.begin, "-b " + a.begin);
  const std::int64_t e = model::parse_count(a.end, "-e " + a.end);
  if (b < 1 || e < b) throw UserError(fmt::format("-b {} -e {}: need 1 <= begin <= end", a.begin, a.end));
  if (a.factor < 2) throw UserError(fmt::format("-f {}: the size factor must be at least 2", a.factor));
  model::check_range(a.channels, 0, model::kMaxChannels, "--channels");
  sim::CollectiveRequest r{sim::parse_coll_op(a.op), 0, where, model::parse_algo(a.algo),
                           model::parse_proto(a.proto), a.channels};
  Table table{{"bytes", "time_us", "algbw_GBps", "busbw_GBps", "algo", "proto"}};
  for (std::int64_t bytes = b;; bytes *= a.factor) {  // b <= e; stops before bytes x factor passes e (or 64 bits)
    r.bytes = double(bytes);
    const sim::CollectiveCost c = sim::predict_collective(t, r);
    const double alg = sim::algbw_GBps(r.bytes, c.time_us());
    table.add({bytes, c.time_us(), alg, alg * sim::bus_factor(r.op, where.ranks), model::to_string(c.algo),
               model::to_string(c.proto)});
    if (bytes > e / a.factor) break;
  }
  if (a.format == Format::table)
    fmt::print("# {} on {}: {} ranks ({} node(s) x {} GPUs), predicted\n", a.op, t.name, where.ranks, where.nodes,
               where.per_node);
  print(table, a.format, tagged("collective", {{"op", a.op}, {"topology", t.name}, {"ranks", where.ranks}}));
}

}  // namespace

void register_collective(CLI::App& app) {
  auto* cmd = app.add_subcommand("collective", "Predict a collective over a size sweep, the way nccl-tests measures it");
  auto a = std::make_shared<Args>();
  cmd->add_option("--op", a->op, "allreduce, reducescatter, allgather, broadcast, reduce or send")->capture_default_str();
  cmd->add_option("--topology,-t", a->topology, "Topology name (configs/topologies/) or YAML file")->capture_default_str();
  cmd->add_option("--nodes,-N", a->nodes, "Nodes (default: the topology's)");
  cmd->add_option("--gpus,-g", a->gpus, "GPUs per node taking part (default: all of the node's)");
  cmd->add_option("-b,--minbytes", a->begin, "Smallest size (K, M, G suffixes: powers of 1024)")->capture_default_str();
  cmd->add_option("-e,--maxbytes", a->end, "Largest size")->capture_default_str();
  cmd->add_option("-f,--stepfactor", a->factor, "Size multiplier between rows")->capture_default_str();
  cmd->add_option("--algo", a->algo, "ring, tree, nvls, hierarchical or auto (NCCL's choice)")->capture_default_str();
  cmd->add_option("--proto", a->proto, "ll, ll128, simple or auto")->capture_default_str();
  cmd->add_option("--channels", a->channels, "NCCL channels (0: the topology's default)")->capture_default_str();
  cmd->add_option("--set", a->sets, "Override a topology value: KEY=VALUE, e.g. network.nic_Gbps=200 (repeatable)");
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
