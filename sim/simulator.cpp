// A fluid event simulation: between two events every running task progresses
// at a constant rate; the next event is the earliest end of a latency phase or
// of a task. Rates: 1 alone; with company, its max-min fair share of the
// bandwidths it uses (a task asking less than an equal split keeps what it
// asks) under its cap: for a GEMM, its wave-quantised speed on the SMs the
// collectives leave it.
#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include <fmt/core.h>

#include "model/error.h"

namespace coconet::sim {

namespace {

constexpr double kDone = 1e-9;  // microseconds left that count as finished

struct Running {
  int task = 0;
  double latency_left = 0;
  double work_left = 0;
};

class Engine {
 public:
  Engine(const std::vector<Task>& tasks, const Context& ctx, const std::vector<RankClass>& classes)
      : tasks_(tasks), ranks_(std::max<int>(1, int(classes.size()))) {
    build_dependencies();
    capacity_.assign(std::size_t(ranks_) * kResources, 0.0);
    std::map<RankScales, std::size_t> seen;  // a topology per distinct scales
    for (std::size_t c = 0; c < classes.size(); ++c) {
      const auto [it, fresh] = seen.try_emplace(classes[c].scales, topologies_.size());
      if (fresh) {
        // Unscaled: the context's own (Topology::scaled would copy it as it is).
        if (classes[c].scales == RankScales{}) {
          topologies_.push_back(&ctx.topology);
        } else {
          scaled_.push_back(ctx.topology.scaled(classes[c].scales));
          topologies_.push_back(&scaled_.back());
        }
      }
      topology_of_.push_back(it->second);
      for (int r = 0; r < kResources; ++r)
        capacity_[c * kResources + std::size_t(r)] = capacity_GBps(*topologies_[it->second], classes[c], Resource(r));
    }
    full_sms_ = ctx.topology.gpu.sms;
    interference_ = ctx.topology.nccl.interference;
    asks_.resize(capacity_.size());
  }

  std::vector<SimEvent> run() {
    std::vector<SimEvent> events(tasks_.size());
    for (std::size_t i = 0; i < tasks_.size(); ++i)
      if (waiting_[i] == 0) start(int(i), events);
    while (!running_.empty()) step(events);
    for (std::size_t i = 0; i < tasks_.size(); ++i)
      if (waiting_[i] >= 0) throw InternalError(fmt::format("task {} never ran", tasks_[i].name));
    return events;
  }

 private:
  // The waits each task states (plan order: stream, producers, the unit before).
  void build_dependencies() {
    const int n = int(tasks_.size());
    dependents_.assign(n, {});
    waiting_.assign(n, 0);
    for (int i = 0; i < n; ++i)
      for (int a : tasks_[i].after) depend(i, a);
  }
  void depend(int task, int on) {
    dependents_[on].push_back(task);
    ++waiting_[task];
  }

  void start(int i, std::vector<SimEvent>& events) {
    const Task& k = tasks_[i];
    waiting_[i] = -1;
    events[i] = SimEvent{i, k.rank, k.peer, k.stream, k.stage, k.name, k.detail, now_, now_, k.duration_us(), {}, {}};
    if (k.is_gate) {  // a join without work: done as soon as it may start
      finish(i, events);
      return;
    }
    running_.push_back({i, k.latency_us, k.work_us});
  }

  void finish(int i, std::vector<SimEvent>& events) {
    events[i].end_us = now_;
    for (int d : dependents_[i])
      if (--waiting_[d] == 0) start(d, events);
  }

  // A kernel's speed on the compute units the running collectives leave it: a
  // GEMM's waves re-quantised on the whole units left; with less than one unit
  // left (a collective's progress needs the only core), a kernel gets that
  // fraction of one unit's speed.
  [[nodiscard]] double compute_rate(const Task& k, double sms_free) const {
    if (sms_free >= full_sms_) return 1.0;
    const double whole = std::max(1.0, std::floor(sms_free + kDone));
    const double fraction = std::clamp(sms_free, 0.0, 1.0);
    double rate = 1.0;
    if (k.is_gemm) {
      const Topology& t = *topologies_[topology_of_[std::size_t(k.rank)]];
      const double alone = gemm_body_us(t, k.gemm, full_sms_);
      const double shared = gemm_body_us(t, k.gemm, int(whole));
      rate = shared > 0 ? alone / shared : 1.0;
    }
    return sms_free >= 1.0 ? rate : rate * fraction;
  }

  // Rate of every running task: in its latency phase, 1 (or its turn on the
  // compute units); in its work phase, its cap (the compute units left to it,
  // or its turn on them) lowered to its max-min fair share of the bandwidths it
  // uses (fair_shares).
  // Written into rate_ (the step's buffers are members, reused from step to step).
  const std::vector<double>& rates() {
    std::vector<double>& sms_held = sms_held_;
    sms_held.assign(std::size_t(ranks_), 0.0);
    for (const Running& r : running_)
      if (tasks_[r.task].sms_held > 0)
        for (int c : tasks_[r.task].ranks) sms_held[c] += tasks_[r.task].sms_held;
    std::vector<double>& cap = cap_;
    cap.assign(running_.size(), 1.0);
    std::vector<char>& sharing = sharing_;  // in its work phase, using some bandwidth
    sharing.assign(running_.size(), 0);
    for (std::size_t j = 0; j < running_.size(); ++j) {
      const Running& r = running_[j];
      const Task& k = tasks_[r.task];
      // Collectives that together need more units than the rank has take turns.
      const double comm_rate = sms_held[k.rank] > full_sms_ ? full_sms_ / sms_held[k.rank] : 1.0;
      if (r.latency_left > kDone) {
        cap[j] = k.sms_held > 0 ? comm_rate : 1.0;
        continue;
      }
      cap[j] = k.is_compute ? compute_rate(k, full_sms_ - sms_held[k.rank]) : k.sms_held > 0 ? comm_rate : 1.0;
      sharing[j] = std::any_of(std::begin(k.demand_GBps), std::end(k.demand_GBps), [](double d) { return d > 0; });
    }
    if (interference_ > 0) interfere(cap);
    fair_shares(cap, sharing);
    return rate_;
  }

  // nccl.interference: on a GPU where a collective's kernel is resident (its
  // CTAs hold their SMs from launch to end, latency phase included) a kernel
  // in its work phase runs at 1 / (1 + interference) of its rate, and a
  // collective in its work phase beside a working kernel likewise; a
  // collective over several classes is slowed when any of them computes.
  void interfere(std::vector<double>& cap) {
    std::vector<char>& computing = computing_;
    std::vector<char>& communicating = communicating_;
    computing.assign(std::size_t(ranks_), 0);
    communicating.assign(std::size_t(ranks_), 0);
    for (const Running& r : running_) {
      const Task& k = tasks_[r.task];
      if (k.is_compute && r.latency_left <= kDone) computing[std::size_t(k.rank)] = 1;
      if (k.is_comm)
        for (int c : k.ranks) communicating[std::size_t(c)] = 1;
    }
    const double slow = 1.0 / (1.0 + interference_);
    for (std::size_t j = 0; j < running_.size(); ++j) {
      const Running& r = running_[j];
      const Task& k = tasks_[r.task];
      if (r.latency_left > kDone) continue;
      const bool hit = k.is_compute ? communicating[std::size_t(k.rank)] != 0
                                    : k.is_comm && std::any_of(k.ranks.begin(), k.ranks.end(), [&](int c) {
                                        return computing[std::size_t(c)] != 0;
                                      });
      if (hit) cap[j] *= slow;
    }
  }

  // Each of a task's demands, by resource slot (rank x resource), on its rank
  // and on a send's receiving rank.
  template <typename F>
  void for_each_demand(const Task& k, F&& f) const {
    const auto on = [&](int rank) {
      for (int x = 0; x < kResources; ++x)
        if (k.demand_GBps[x] > 0) f(std::size_t(rank) * kResources + std::size_t(x), k.demand_GBps[x]);
    };
    for (int c : k.ranks) on(c);
    for (int c : k.peers) on(c);  // never one of k.ranks (tasks.cpp)
  }

  // Max-min fair shares in bytes: each resource is water-filled among the
  // collectives using it first, then among the other tasks with what is left
  // (a task asking less than an equal split of what is left keeps what it
  // asks, the others split the rest equally), a task runs at the
  // smallest fraction of its demand any of its resources grants, and what a
  // task cannot use because another resource holds it back goes to the others
  // (repeated until no rate changes; rates only fall, so this ends).
  // Into rate_.
  void fair_shares(const std::vector<double>& cap, const std::vector<char>& sharing) {
    const std::size_t n = running_.size();
    std::vector<double>& rate = rate_;
    rate.assign(cap.begin(), cap.end());
    constexpr int kMaxRounds = 64;
    for (int round = 0; round < kMaxRounds; ++round) {
      // Each slot's users and what they ask at their present rate (only the slots in use are visited).
      std::vector<std::size_t>& used = used_;
      used.clear();
      for (std::size_t j = 0; j < n; ++j)
        if (sharing[j])
          for_each_demand(tasks_[running_[j].task], [&](std::size_t slot, double d) {
            if (asks_[slot].empty()) used.push_back(slot);
            asks_[slot].push_back({rate[j] * d, j});
          });
      std::sort(used.begin(), used.end());
      std::vector<double>& next = next_;
      next.assign(cap.begin(), cap.end());
      for (std::size_t j = 0; j < n; ++j)
        if (sharing[j]) next[j] = rate[j];
      for (std::size_t slot : used) {
        auto& a = asks_[slot];
        // Communication first (its stream has the higher priority, and a kernel
        // beside it must not make it slower by getting faster), then the rest.
        const auto comm_first = [&](const auto& x, const auto& y) {
          const bool cx = tasks_[running_[x.second].task].is_comm, cy = tasks_[running_[y.second].task].is_comm;
          return cx != cy ? cx : x < y;
        };
        std::sort(a.begin(), a.end(), comm_first);
        double left = capacity_[slot];
        std::size_t comm = 0;
        while (comm < a.size() && tasks_[running_[a[comm].second].task].is_comm) ++comm;
        for (std::size_t i = 0; i < a.size(); ++i) {
          const std::size_t in_class = i < comm ? comm - i : a.size() - i;
          const double equal = left / double(in_class);
          const double granted = std::min(a[i].first, equal);
          left -= granted;
          const std::size_t j = a[i].second;
          const double d = tasks_[running_[j].task].demand_GBps[slot % kResources];
          next[j] = std::min(next[j], granted / d);
        }
        a.clear();
      }
      bool changed = false;
      for (std::size_t j = 0; j < n; ++j) changed = changed || std::abs(next[j] - rate[j]) > kDone * kDone;
      rate.swap(next);
      if (!changed) break;
    }
  }

  void step(std::vector<SimEvent>& events) {
    const std::vector<double>& rate = rates();
    double dt = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < running_.size(); ++j) {
      const Running& r = running_[j];
      if (r.latency_left > kDone) dt = std::min(dt, r.latency_left / rate[j]);
      else if (rate[j] > 0) dt = std::min(dt, r.work_left / rate[j]);
      // rate 0: a kernel waiting for a compute unit; it resumes when a collective ends
    }
    if (!std::isfinite(dt)) throw InternalError("simulation stalled");
    now_ += dt;
    std::vector<int>& finished = finished_;
    finished.clear();
    for (std::size_t j = 0; j < running_.size(); ++j) {
      Running& r = running_[j];
      if (r.latency_left > kDone) r.latency_left -= dt * rate[j];
      else r.work_left -= dt * rate[j];
      if (r.latency_left <= kDone && r.work_left <= kDone) finished.push_back(r.task);
    }
    std::erase_if(running_, [](const Running& r) { return r.latency_left <= kDone && r.work_left <= kDone; });
    for (int i : finished) finish(i, events);
  }

  const std::vector<Task>& tasks_;
  int ranks_ = 1;  // classes simulated
  int full_sms_ = 1;
  double interference_ = 0;
  std::vector<double> capacity_;            // class x resource
  std::deque<Topology> scaled_;             // the scaled topologies (a deque: they stay where they are)
  std::vector<const Topology*> topologies_;  // one per distinct scales
  std::vector<std::size_t> topology_of_;    // class -> its topology
  std::vector<std::vector<std::pair<double, std::size_t>>> asks_;  // per slot, reused
  std::vector<std::vector<int>> dependents_;
  std::vector<int> waiting_;
  std::vector<Running> running_;
  double now_ = 0;
  // A step's buffers, kept to be reused: rates() and fair_shares() (rate_ the
  // rates they give), interfere(), step()'s finished tasks.
  std::vector<double> sms_held_, cap_, rate_, next_;
  std::vector<char> sharing_, computing_, communicating_;
  std::vector<std::size_t> used_;
  std::vector<int> finished_;
};

}  // namespace

std::string stream_name(int i) { return plan::to_string(plan::Stream(i)); }

SimResult simulate(const plan::StepPlan& p, const Context& ctx) { return simulate(p, ctx, SimOptions{}); }

SimResult simulate(const plan::StepPlan& p, const Context& ctx, const SimOptions& o) {
  const std::vector<RankClass> classes = rank_classes(ctx.topology, p.ranks_per_group, p.groups, ctx.rank_mode);
  const std::vector<Task> tasks = make_tasks(p, ctx, classes, o.describe);
  SimResult out;
  out.events = Engine(tasks, ctx, classes).run();
  std::erase_if(out.events, [&](const SimEvent& e) { return tasks[std::size_t(e.task)].is_gate; });
  out.stages.resize(p.stage_codes.size());
  for (std::size_t s = 0; s < p.stage_codes.size(); ++s) {
    out.stages[s].code = p.stage_codes[s];
    out.stages[s].start_us = std::numeric_limits<double>::infinity();
  }
  // alone[stage][class]: the stage's tasks alone on each class (a collective counts on every class it spans).
  std::vector<std::vector<double>> alone(p.stage_codes.size(), std::vector<double>(classes.size(), 0.0));
  for (SimEvent& e : out.events) {
    const Task& k = tasks[std::size_t(e.task)];
    if (k.ranks.size() > 1) e.also.assign(k.ranks.begin() + 1, k.ranks.end());
    if (k.peers.size() > 1) e.also_peers.assign(k.peers.begin() + 1, k.peers.end());
    StageTiming& st = out.stages[e.stage];
    if (st.detail.empty()) st.detail = e.detail;
    st.start_us = std::min(st.start_us, e.start_us);
    st.end_us = std::max(st.end_us, e.end_us);
    alone[std::size_t(e.stage)][std::size_t(e.rank)] += e.alone_us;
    for (const int c : e.also) alone[std::size_t(e.stage)][std::size_t(c)] += e.alone_us;
    out.time_us = std::max(out.time_us, e.end_us);
    out.streams = std::max(out.streams, e.stream + 1);
  }
  for (std::size_t s = 0; s < alone.size(); ++s) {
    const auto top = std::max_element(alone[s].begin(), alone[s].end());
    if (top == alone[s].end()) continue;
    out.stages[s].alone_us = *top;
    out.stages[s].alone_class = static_cast<int>(top - alone[s].begin());
  }
  for (const RankClass& c : classes) out.rank_names.push_back(c.label);
  out.classes = classes;
  return out;
}

SimResult simulate(const model::Schedule& s, const Context& ctx) { return simulate(lower_for(s, ctx), ctx); }

}  // namespace coconet::sim
