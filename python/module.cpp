// The Python module `coconet` (pybind11): predict, tune, simulate and
// collective return the "points" (collective: the "rows") of the JSON object
// (step and compare: the whole object)
// the `coconet` command prints with --format json, built by the same code
// (cli/results.h) and converted to Python lists and dicts, so the two never
// differ; the loaders return a workload, topology or experiment as a dict,
// resolved as the command resolves names and paths.
//
// Design notes
// - JSON, not bound C++ types: the command's JSON is the output contract
//   (docs/schema/), so Python gets exactly its fields, nothing to keep in step.
// - Arguments are the command's flags as keywords (`topology=`, `nodes=`,
//   `ranks=`, `sets=`, `backend=`, knobs); `sets` is a dict {name: value} or a
//   list of "NAME=VALUE" strings, read by the same --set rules.
// - Errors: a UserError (bad input) raises ValueError with coconet's message;
//   a RunFailure or an internal error, RuntimeError.
// - The GIL is released while coconet computes.
#include <fmt/core.h>
#include <filesystem>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/compare_results.h"
#include "cli/json_out.h"
#include "cli/results.h"
#include "cli/step_results.h"
#include "cli/workload_args.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/points.h"
#include "model/safe_write.h"
#include "sim/topology.h"
#include "step/spec.h"

namespace py = pybind11;

namespace coconet::python {

namespace {

py::object to_python(const nlohmann::json& j) {
  using T = nlohmann::json::value_t;
  switch (j.type()) {
    case T::null:
      return py::none();
    case T::boolean:
      return py::bool_(j.get<bool>());
    case T::number_integer:
      return py::int_(j.get<std::int64_t>());
    case T::number_unsigned:
      return py::int_(j.get<std::uint64_t>());
    case T::number_float:
      return py::float_(j.get<double>());
    case T::string:
      return py::str(j.get_ref<const std::string&>());
    case T::array: {
      py::list out;
      for (const auto& e : j) out.append(to_python(e));
      return out;
    }
    case T::object: {
      py::dict out;
      for (const auto& [k, v] : j.items()) out[py::str(k)] = to_python(v);
      return out;
    }
    default:
      throw InternalError("a JSON value of coconet that Python has no type for");
  }
}

// A name or a path (str or os.PathLike), or None.
// A name or a path given to keyword `what`; one holding a NUL byte is refused
// as Python's own open() refuses it (the C library would stop at the NUL and
// use another file: issue 34, out='/tmp/x.yaml\x00.evil' wrote /tmp/x.yaml).
std::optional<std::string> name_or_path(const py::object& o, const char* what) {
  if (o.is_none()) return std::nullopt;
  std::string s = py::module_::import("os").attr("fspath")(o).cast<std::string>();
  if (const auto nul = s.find('\0'); nul != std::string::npos)
    throw UserError(fmt::format("{}: embedded null byte (at character {} of '{}'): a name or path cannot hold one",
                                what, nul, s.substr(0, nul)));
  return s;
}

std::string text_of(const py::handle& v) {
  if (py::isinstance<py::bool_>(v))
    throw UserError("sets: a value is a number or a string, not True/False");
  return py::str(v).cast<std::string>();
}

// `sets` as --set arguments: None, a dict {name: value}, a "NAME=VALUE"
// string, or a list of them.
std::vector<std::string> set_arguments(const py::object& sets) {
  std::vector<std::string> out;
  if (sets.is_none()) return out;
  if (py::isinstance<py::dict>(sets)) {
    for (const auto& [k, v] : sets.cast<py::dict>()) out.push_back(text_of(k) + "=" + text_of(v));
  } else if (py::isinstance<py::str>(sets)) {
    out.push_back(sets.cast<std::string>());
  } else {
    for (const auto& item : sets) out.push_back(text_of(item));
  }
  return out;
}

// What CLI11 checks on the command line (cli/messages.h: at_least).
std::optional<int> at_least_one(const std::optional<int>& v, const char* name) {
  if (v && *v < 1)
    throw UserError(fmt::format("{}: needs a whole number of at least 1, got {}", name, *v));
  return v;
}

cli::PredictArgs predict_args(const py::object& target, const py::object& topology,
                              std::optional<int> nodes, std::optional<int> ranks,
                              const py::object& sets, const std::optional<std::string>& backend) {
  cli::PredictArgs a;
  a.target = name_or_path(target, "target");
  a.topology = name_or_path(topology, "topology");
  a.nodes = at_least_one(nodes, "nodes");
  a.ranks = at_least_one(ranks, "ranks");
  a.sets = set_arguments(sets);
  a.backend = backend;
  return a;
}

py::object points_of(const nlohmann::json& j) { return to_python(j.at("points")); }

py::object predict(const py::object& target, const py::object& topology, std::optional<int> nodes,
                   std::optional<int> ranks, const py::object& sets,
                   const std::optional<std::string>& backend) {
  const cli::PredictArgs a = predict_args(target, topology, nodes, ranks, sets, backend);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = cli::point_reports_json(cli::predict_points(a, /*tune=*/false), "predict");
  }
  return points_of(j);
}

py::object tune(const py::object& target, const py::object& topology, std::optional<int> nodes,
                std::optional<int> ranks, const py::object& sets,
                const std::optional<std::string>& backend, const py::object& out) {
  const cli::PredictArgs a = predict_args(target, topology, nodes, ranks, sets, backend);
  const std::optional<std::string> file = name_or_path(out, "out");
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    if (file) model::check_output_file(*file, "out");  // before any work, as `tune --out`
    const auto reports = cli::predict_points(a, /*tune=*/true);
    if (file) model::write_file_safely(*file, cli::best_schedules_yaml(reports), "out");
    j = cli::point_reports_json(reports, "tune");
  }
  return points_of(j);
}

py::object simulate(const py::object& target, const py::object& schedule,
                    const py::object& topology, std::optional<int> nodes, std::optional<int> ranks,
                    const py::object& sets, const std::optional<std::string>& backend,
                    std::optional<int> chunks, std::optional<std::string> algo,
                    std::optional<std::string> proto, std::optional<int> channels) {
  cli::SimulateArgs a;
  a.predict = predict_args(target, topology, nodes, ranks, sets, backend);
  a.schedule = name_or_path(schedule, "schedule").value_or("");
  a.knobs = cli::KnobArgs{chunks, std::move(algo), std::move(proto), channels};
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = cli::simulation_json(cli::simulate_points(a));
  }
  return points_of(j);
}

py::object collective(const std::string& op, const py::object& topology, std::optional<int> nodes,
                      std::optional<int> gpus, const py::object& minbytes,
                      const py::object& maxbytes, int stepfactor, const std::string& algo,
                      const std::string& proto, int channels, const py::object& sets) {
  cli::CollectiveArgs a;
  a.op = op;
  a.topology = name_or_path(topology, "topology").value_or(a.topology);
  a.nodes = at_least_one(nodes, "nodes");
  a.gpus = gpus;
  a.begin = text_of(minbytes);
  a.end = text_of(maxbytes);
  a.factor = stepfactor;
  a.algo = algo;
  a.proto = proto;
  a.channels = channels;
  a.sets = set_arguments(sets);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = cli::collective_json(cli::collective_sweep(a));
  }
  return to_python(j.at("rows"));
}

// ---- loaders ---------------------------------------------------------------

// `coconet step MODEL --format json` as a dict (its "layouts": the priced
// layout, or the search's best first).
py::object step(const py::object& model, const py::object& topology, std::optional<int> nodes, const py::object& sets,
                bool search, int top) {
  cli::StepRequest r;
  r.model = name_or_path(model, "model").value_or("");
  r.topology = name_or_path(topology, "topology").value_or(r.topology);
  r.nodes = at_least_one(nodes, "nodes");
  r.sets = set_arguments(sets);
  r.search = search;
  r.top = at_least_one(top, "top").value_or(1);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = cli::step_json(cli::run_step(r));
  }
  return to_python(j);
}

// `coconet compare TARGET --format json` as a dict: a model's step on each
// side ("sides"), or a workload's or experiment's points ("points").
py::object compare(const py::object& target, const py::object& topologies, const py::object& nodes,
                   const py::object& sets, bool search) {
  const std::optional<std::string> t = name_or_path(target, "target");
  std::vector<std::string> ts;  // a list of names or paths, or one
  if (py::isinstance<py::str>(topologies) || py::isinstance(topologies, py::module_::import("os").attr("PathLike")))
    ts.push_back(name_or_path(topologies, "topologies").value_or(""));
  else if (!topologies.is_none())
    for (const auto& x : topologies) ts.push_back(name_or_path(py::reinterpret_borrow<py::object>(x), "topologies").value_or(""));
  std::vector<int> ns;  // a list of node counts, or one
  if (py::isinstance<py::int_>(nodes)) ns.push_back(at_least_one(nodes.cast<int>(), "nodes").value_or(1));
  else if (!nodes.is_none())
    for (const auto& x : nodes) ns.push_back(at_least_one(x.cast<int>(), "nodes").value_or(1));
  const std::vector<std::string> set = set_arguments(sets);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    if (t && step::names_a_model(*t)) {
      cli::StepRequest r;
      r.model = *t;
      r.sets = set;
      r.search = search;
      j = cli::compare_steps_json(cli::compare_steps(r, ts, ns));
    } else {
      if (search) throw UserError("search compares a model's best layouts: give a model (models/*.yaml)");
      cli::PredictArgs a;
      a.target = t;
      a.sets = set;
      std::vector<cli::Side> sides = cli::compare_sides(ts, ns);
      cli::predict_sides(model::experiment_from_argument(a.target), a, sides);
      j = cli::compare_json(sides);
    }
  }
  return to_python(j);
}

nlohmann::json workload_json(const std::string& name_or_path,
                             const std::vector<std::string>& sets) {
  const std::string path = model::resolve_workload(name_or_path);
  const model::Program p = cli::load_workload(name_or_path, sets);
  nlohmann::json schedules = nlohmann::json::array();
  for (const auto& s : model::enumerate_schedules(p)) schedules.push_back(s.name());
  return {{"workload", p.name},
          {"description", p.description},
          {"path", path},
          {"sizes", cli::sizes_json(p.params)},
          {"scalars", p.scalars},
          {"groups", p.groups()},
          {"program", model::to_string(p)},
          {"schedules", schedules}};
}

nlohmann::json topology_json(const std::string& name_or_path,
                             const std::vector<std::string>& sets) {
  sim::Overrides overrides;
  for (const auto& s : sets) overrides.push_back(model::parse_assignment(s));
  const sim::Topology t = sim::load_topology(name_or_path, overrides);
  return {{"name", t.name},
          {"description", t.description},
          {"path", t.origin},
          {"device", t.device == sim::Device::gpu ? "gpu" : "cpu"},
          {"nodes", t.nodes},
          {"gpus_per_node", t.node.gpus},
          {"total_gpus", t.total_gpus()},
          {"gpu",
           {{"model", t.gpu.model},
            {"sms", t.gpu.sms},
            {"hbm_GBps", t.gpu.hbm_GBps},
            {"tflops_f16", t.gpu.tflops_f16},
            {"tflops_bf16", t.gpu.tflops_bf16},
            {"tflops_f32", t.gpu.tflops_f32}}},
          {"node",
           {{"nvlink_links", t.node.nvlink_links},
            {"nvlink_GBps", t.node.nvlink_GBps()},
            {"nvls", t.node.nvls}}},
          {"network", {{"nics", t.network.nics}, {"nic_Gbps", t.network.nic_Gbps}}},
          {"nccl", {{"channels", t.nccl.channels}}},
          {"summary", sim::describe(t)}};
}

nlohmann::json experiment_json(const std::optional<std::string>& target) {
  const model::Experiment e = model::experiment_from_argument(target);
  nlohmann::json workloads = nlohmann::json::array();
  for (const auto& w : e.workloads)
    workloads.push_back({{"workload", w.workload},
                         {"sizes", w.sizes},
                         {"scalars", w.scalars},
                         {"ranks", w.ranks ? nlohmann::json(*w.ranks) : nlohmann::json()}});
  const auto optional = [](const std::optional<int>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
  };
  return {{"name", e.name},
          {"topology", e.topology},
          {"nodes", optional(e.nodes)},
          {"gpus_per_node", optional(e.gpus_per_node)},
          {"ranks", optional(e.ranks)},
          {"iters", e.iters},
          {"warmup", e.warmup},
          {"workloads", workloads}};
}

nlohmann::json names_json() {
  return {{"root", model::data_root()},
          {"workloads", model::list_names("workloads")},
          {"experiments", model::list_names("configs/experiments")},
          {"topologies", model::list_names("configs/topologies")},
          {"models", model::list_names("models")}};
}

void translate_errors() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UserError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::filesystem::filesystem_error& e) {  // a path the system refused: as exit_code_for
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const RunFailure& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const InternalError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace

}  // namespace coconet::python

PYBIND11_MODULE(coconet, m) {
  using namespace coconet::python;
  using namespace pybind11::literals;
  m.doc() =
      "coconet: predict distributed deep-learning schedules on GPU clusters. predict, tune, "
      "simulate and "
      "collective return the points (collective: rows) of `coconet <command> --format json` as "
      "dicts.";
  m.attr("__version__") = COCONET_VERSION;
  translate_errors();

  const py::none none;
  m.def("predict", &predict,
        "Every schedule of every point of an experiment or workload (None: the embedded default), "
        "predicted and "
        "ranked: the 'points' of `coconet predict --format json`.",
        "target"_a = none, py::kw_only(), "topology"_a = none, "nodes"_a = none, "ranks"_a = none,
        "sets"_a = none, "backend"_a = none);
  m.def("tune", &tune,
        "Like predict, over every knob: the 'points' of `coconet tune --format json`; `out`: write "
        "the best "
        "schedule of each point as YAML, as `tune --out` does.",
        "target"_a = none, py::kw_only(), "topology"_a = none, "nodes"_a = none, "ranks"_a = none,
        "sets"_a = none, "backend"_a = none, "out"_a = none);
  m.def("simulate", &simulate,
        "One schedule (a name or a schedule YAML file) through the event simulator: the 'points' "
        "of `coconet "
        "simulate --format json`.",
        "target"_a, "schedule"_a, py::kw_only(), "topology"_a = none, "nodes"_a = none,
        "ranks"_a = none, "sets"_a = none, "backend"_a = none, "chunks"_a = none, "algo"_a = none,
        "proto"_a = none, "channels"_a = none);
  m.def("collective", &collective,
        "The cost model's nccl-tests over a size sweep: the 'rows' of `coconet collective --format "
        "json`.",
        "op"_a = "allreduce", py::kw_only(), "topology"_a = "dgx-h100", "nodes"_a = none,
        "gpus"_a = none, "minbytes"_a = "8", "maxbytes"_a = "8G", "stepfactor"_a = 2,
        "algo"_a = "auto", "proto"_a = "auto", "channels"_a = 0, "sets"_a = none);
  m.def("step", &step,
        "One training step of a model (a name in models/ or a YAML path) on a cluster: `coconet step "
        "--format json` as a dict; `search`: the best `top` layouts that fit.",
        "model"_a, py::kw_only(), "topology"_a = "dgx-h100", "nodes"_a = none, "sets"_a = none, "search"_a = false,
        "top"_a = 5);
  m.def("compare", &compare,
        "`coconet compare --format json` as a dict: a model's step on each side (each of `topologies` at each "
        "of `nodes`; `search`: each side's best layout), or a workload's or experiment's best schedules.",
        "target"_a, py::kw_only(), "topologies"_a = none, "nodes"_a = none, "sets"_a = none, "search"_a = false);
  m.def(
      "load_workload",
      [](const py::object& name, const py::object& sets) {
        return to_python(workload_json(name_or_path(name, "name").value_or(""), set_arguments(sets)));
      },
      "A workload (a name in workloads/ or a YAML path) with `sets` applied: its sizes, scalars, "
      "program and "
      "schedule names.",
      "name"_a, py::kw_only(), "sets"_a = none);
  m.def(
      "load_topology",
      [](const py::object& name, const py::object& sets) {
        return to_python(topology_json(name_or_path(name, "name").value_or(""), set_arguments(sets)));
      },
      "A topology (a name in configs/topologies/ or a YAML path) with `sets` applied.", "name"_a,
      py::kw_only(), "sets"_a = none);
  m.def(
      "load_experiment",
      [](const py::object& target) { return to_python(experiment_json(name_or_path(target, "target"))); },
      "An experiment as predict reads its target: None (the embedded default), an experiment name "
      "or path, or "
      "a workload (the default experiment narrowed to it).",
      "target"_a = none);
  m.def(
      "names", [] { return to_python(names_json()); },
      "The workloads, experiments, topologies and models found, as `coconet list` prints them.");
}
