// The YAML front end and the statement/expression parser (recursive descent,
// depth-limited: a nesting deeper than kMaxExprDepth, a statement longer than
// kMaxExprLength or a program of more than kMaxStatements statements is a
// UserError, so no input can overflow the stack of the parser or of the
// recursive expression walks after it).
#include "model/parse.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include "model/catalog.h"
#include "model/error.h"
#include "model/limits.h"
#include "model/yaml_util.h"

namespace coconet::model {

// ---------------------------------------------------------------------------
// Expressions

namespace {

// Base of the dropout seeds: each dropout site of a program gets base + ordinal.
constexpr std::uint64_t kDropoutSeedBase = 0x5eed0000ULL;

class Parser {
 public:
  Parser(const std::string& text, std::uint64_t* seeds) : text_(text), seeds_(seeds) {
    if (text_.size() > kMaxExprLength)
      throw UserError(fmt::format("a statement of {} characters is longer than the limit of {} characters "
                                  "(it begins '{}...'); split it into several statements",
                                  text_.size(), kMaxExprLength, text_.substr(0, 40)));
  }

  void statement(Stmt& s) {
    skip();
    s.name = identifier("the name of the value this statement defines");
    skip();
    if (!eat('=')) fail("expected '=' after the name: write 'name = expression'");
    const std::size_t rhs_start = pos_;
    if (!try_operation(s)) {
      pos_ = rhs_start;
      s.op = OpKind::compute;
      s.expr = expr();
    } else if (const std::size_t end = pos_; skip(), pos_ != text_.size() && s.op != OpKind::update) {
      std::string op = text_.substr(rhs_start, end - rhs_start);
      op.erase(0, op.find_first_not_of(" \t"));
      fail(fmt::format("'{}' is an operation and must be the whole right-hand side: write "
                       "'NAME = {}' and use NAME in another statement",
                       op, op));
    }
    skip();
    if (pos_ != text_.size()) fail("unexpected text after the end of the expression");
    if (s.expr) check_depth(s.expr);
    s.source = text_;
  }

  Expr whole_expr() {
    Expr e = expr();
    skip();
    if (pos_ != text_.size()) fail("unexpected text after the end of the expression");
    check_depth(e);
    return e;
  }

 private:
  const std::string& text_;
  std::uint64_t* seeds_;
  std::size_t pos_ = 0;
  int depth_ = 0;  // nesting of expr() and unary() calls now active

  // Counts one level of nesting while alive; past kMaxExprDepth the parse fails.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxExprDepth)
        p_.fail(fmt::format("the expression nests deeper than the limit of {} levels (parentheses, "
                            "calls, unary signs); split it into several statements",
                            kMaxExprDepth));
    }
    ~Nest() { --p_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
  };

  // A long chain of operators (a+a+...+a) builds a tree as deep as it is long:
  // the same limit applies to the finished tree.
  void check_depth(const Expr& e) const {
    const int d = expr_depth(e);
    if (d > kMaxExprDepth)
      throw UserError(fmt::format("in statement '{}...': the expression tree is {} levels deep, more than the "
                                  "limit of {} (a chain of that many operators); split it into several "
                                  "statements",
                                  text_.substr(0, 40), d, kMaxExprDepth));
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(fmt::format("in statement '{}', column {}: {}", text_, pos_ + 1, what));
  }

  void skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const char* context) {
    if (!eat(c)) fail(fmt::format("expected '{}' {}", c, context));
  }
  bool eat_str(const char* s) {
    skip();
    const std::string_view sv(s);
    if (text_.compare(pos_, sv.size(), sv) != 0) return false;
    pos_ += sv.size();
    return true;
  }

  bool at_identifier() {
    skip();
    return pos_ < text_.size() &&
           (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_');
  }

  std::string identifier(const char* what) {
    if (!at_identifier()) fail(fmt::format("expected {}", what));
    const std::size_t b = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    return text_.substr(b, pos_ - b);
  }

  double number() {
    skip();
    const char* begin = text_.c_str() + pos_;
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin) fail("expected a number");
    if (!std::isfinite(v)) fail(fmt::format("the number '{}' is not finite", std::string(begin, static_cast<std::size_t>(end - begin))));
    pos_ += static_cast<std::size_t>(end - begin);
    return v;
  }

  // --- statement-level operations -----------------------------------------

  ReduceOp reduce_op() {
    const std::size_t at = pos_;
    const std::string op = identifier("a reduction (sum, max, min or mean)");
    if (op == "sum") return ReduceOp::sum;
    if (op == "max") return ReduceOp::max;
    if (op == "min") return ReduceOp::min;
    if (op == "mean") return ReduceOp::mean;
    pos_ = at;
    fail(fmt::format("unknown reduction '{}': use sum, max, min or mean", op));
  }

  int root() {
    const double v = number();
    if (!(v >= 0 && v <= double(kMaxRanks)) || v != std::floor(v))
      fail(fmt::format("the root must be a rank number (0, 1, ..., at most {})", kMaxRanks - 1));
    return static_cast<int>(v);
  }

  int dimension() {
    const double v = number();
    if (!(v >= 0 && v <= double(std::numeric_limits<int>::max())) || v != std::floor(v))
      fail("the dimension must be a whole number: 0 for the first dimension, 1 for the second, ...");
    return static_cast<int>(v);
  }

  bool try_operation(Stmt& s) {
    if (!at_identifier()) return false;
    const std::size_t at = pos_;
    const std::string name = identifier("");
    static const std::set<std::string> ops = {"allreduce", "reducescatter", "allgather",
                                              "broadcast", "reduce",        "send",
                                              "matmul",    "norm",          "update",
                                              "rowsum",    "rowmax",        "alltoall"};
    if (!ops.count(name) || !peek('(')) {
      pos_ = at;
      return false;
    }
    expect('(', "");
    if (name == "allreduce" || name == "reducescatter" || name == "reduce") {
      s.op = name == "allreduce"       ? OpKind::allreduce
             : name == "reducescatter" ? OpKind::reducescatter
                                       : OpKind::reduce;
      s.reduce = reduce_op();
      expect(',', fmt::format("after the reduction: write {}(sum, x)", name).c_str());
      s.operands = {identifier("the tensor to reduce")};
      if (s.op == OpKind::reduce) {
        expect(',', "before the root: write reduce(sum, x, ROOT)");
        s.root = root();
      }
    } else if (name == "allgather" || name == "norm") {
      s.op = name == "norm" ? OpKind::norm : OpKind::allgather;
      s.operands = {identifier("a tensor name")};
    } else if (name == "rowsum" || name == "rowmax") {
      s.op = OpKind::rowreduce;
      s.reduce = name == "rowmax" ? ReduceOp::max : ReduceOp::sum;
      const std::string hint = fmt::format("{} takes a tensor name; compute an expression in a statement of its "
                                           "own first (x2 = x * x, then {}(x2))",
                                           name, name);
      if (!at_identifier()) fail(hint);
      s.operands = {identifier("")};
      if (!peek(')')) fail(hint);
    } else if (name == "broadcast") {
      s.op = OpKind::broadcast;
      s.operands = {identifier("the tensor to broadcast")};
      expect(',', "before the root: write broadcast(x, ROOT)");
      s.root = root();
    } else if (name == "send") {
      s.op = OpKind::send;
      s.operands = {identifier("the tensor to send")};
      if (eat(',')) {
        const std::size_t g = pos_;
        if (identifier("'next'") != "next") {
          pos_ = g;
          fail("send goes to the next process group: write send(x) or send(x, next)");
        }
      }
    } else if (name == "alltoall") {
      s.op = OpKind::alltoall;
      s.operands = {identifier("the tensor to re-slice")};
      expect(',', "before the dimension: write alltoall(x, DIM), DIM the dimension the result is sliced along");
      s.dim = dimension();
    } else if (name == "matmul") {
      s.op = OpKind::matmul;
      s.operands.push_back(identifier("the left operand"));
      expect(',', "between the operands: write matmul(a, b)");
      s.operands.push_back(identifier("the right operand"));
    } else {  // update
      s.op = OpKind::update;
      s.target = identifier("the state tensor to update");
      expect(',', "after the state tensor: write update(t, new_value)");
      s.expr = expr();
    }
    expect(')', fmt::format("to close {}(...)", name).c_str());
    return true;
  }

  // --- element-wise expressions -------------------------------------------

  Expr expr() {
    const Nest nest(*this);
    Expr a = additive();
    static const std::pair<const char*, BinaryOp> cmps[] = {
        {"<=", BinaryOp::le}, {">=", BinaryOp::ge}, {"==", BinaryOp::eq},
        {"!=", BinaryOp::ne}, {"<", BinaryOp::lt},  {">", BinaryOp::gt}};
    for (const auto& [tok, op] : cmps)
      if (eat_str(tok)) return make_binary(op, a, additive());
    return a;
  }

  Expr additive() {
    Expr a = multiplicative();
    for (;;) {
      if (eat('+')) a = make_binary(BinaryOp::add, a, multiplicative());
      else if (eat('-')) a = make_binary(BinaryOp::sub, a, multiplicative());
      else return a;
    }
  }

  Expr multiplicative() {
    Expr a = unary();
    for (;;) {
      if (eat('*')) a = make_binary(BinaryOp::mul, a, unary());
      else if (eat('/')) a = make_binary(BinaryOp::div, a, unary());
      else return a;
    }
  }

  Expr unary() {
    const Nest nest(*this);
    if (eat('-')) return make_unary(UnaryOp::neg, unary());
    if (eat('+')) return unary();
    return primary();
  }

  std::vector<Expr> call_args(const std::string& fn, std::size_t n) {
    std::vector<Expr> args;
    expect('(', fmt::format("after {}", fn).c_str());
    for (std::size_t i = 0; i < n; ++i) {
      if (i) expect(',', fmt::format("{} takes {} arguments", fn, n).c_str());
      args.push_back(expr());
    }
    expect(')', fmt::format("{} takes {} argument(s)", fn, n).c_str());
    return args;
  }

  Expr primary() {
    skip();
    if (pos_ >= text_.size()) fail("the expression ends too early");
    if (eat('(')) {
      Expr e = expr();
      expect(')', "to close the parenthesis");
      return e;
    }
    const char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return make_const(number());
    if (!at_identifier()) fail(fmt::format("unexpected '{}'", c));
    const std::size_t at = pos_;
    const std::string name = identifier("");
    if (!peek('(')) return make_tensor(name);
    return function(name, at);
  }

  Expr function(const std::string& name, std::size_t at) {
    static const std::pair<const char*, UnaryOp> unaries[] = {
        {"sqrt", UnaryOp::sqrt}, {"rsqrt", UnaryOp::rsqrt}, {"abs", UnaryOp::abs},
        {"exp", UnaryOp::exp},   {"log", UnaryOp::log},     {"tanh", UnaryOp::tanh},
        {"gelu", UnaryOp::gelu}};
    for (const auto& [fn, op] : unaries)
      if (name == fn) return make_unary(op, call_args(name, 1)[0]);
    static const std::pair<const char*, BinaryOp> binaries[] = {
        {"pow", BinaryOp::pow}, {"max", BinaryOp::max}, {"min", BinaryOp::min}};
    for (const auto& [fn, op] : binaries)
      if (name == fn) {
        auto a = call_args(name, 2);
        return make_binary(op, a[0], a[1]);
      }
    if (name == "select") {
      auto a = call_args(name, 3);
      return make_select(a[0], a[1], a[2]);
    }
    if (name == "cast") {
      expect('(', "after cast");
      Expr x = expr();
      expect(',', "write cast(x, f16|bf16|f32)");
      const std::string t = identifier("a dtype (f16, bf16 or f32)");
      expect(')', "to close cast(...)");
      try {
        return make_cast(parse_dtype(t), x);
      } catch (const UserError& e) {
        fail(e.what());
      }
    }
    if (name == "dropout") {
      expect('(', "after dropout");
      Expr x = expr();
      expect(',', "write dropout(x, p) with p a probability such as 0.1");
      const double p = number();
      expect(')', "to close dropout(...)");
      if (!(p >= 0.0 && p < 1.0)) fail(fmt::format("dropout probability {} must be in [0, 1)", p));
      return make_dropout(x, p, kDropoutSeedBase + ++*seeds_);
    }
    pos_ = at;
    fail(fmt::format("unknown function '{}': element-wise functions are sqrt, rsqrt, abs, exp, "
                     "log, tanh, gelu, pow, max, min, select, cast, dropout; operations are allreduce, "
                     "reducescatter, allgather, alltoall, broadcast, reduce, send, matmul, norm, rowsum, "
                     "rowmax, update (and only as the whole right-hand side)",
                     name));
  }
};

}  // namespace

void parse_statement(const std::string& text, Stmt& stmt, std::uint64_t& seed_counter) {
  Parser(text, &seed_counter).statement(stmt);
}

Expr parse_expr(const std::string& text) {
  std::uint64_t seeds = 0;
  return Parser(text, &seeds).whole_expr();
}

// ---------------------------------------------------------------------------
// Workload YAML

namespace {

TensorDecl parse_tensor(const YamlContext& y, const std::string& name, const YAML::Node& n) {
  y.require_map(n, fmt::format("tensor '{}'", name));
  y.allow_keys(n, {"dtype", "shape", "layout", "group", "shardable"},
               fmt::format("tensor '{}'", name));
  TensorDecl t;
  t.name = name;
  y.wrap(n, [&] {
    t.type.dtype = parse_dtype(y.required<std::string>(n, "dtype", "tensor " + name));
    const YAML::Node shape = n["shape"];
    if (!shape || !shape.IsSequence())
      y.fail(n, fmt::format("tensor '{}' needs a shape, a list such as [N] or [B*S, H]", name));
    for (const auto& d : shape)
      y.wrap(d, [&] { t.type.shape.push_back(parse_dim(y.scalar<std::string>(d, "a dimension"))); });
    t.type.layout = parse_layout(y.required<std::string>(n, "layout", "tensor " + name));
    t.type.group = y.optional<int>(n, "group", 0);
    t.shardable = y.optional<bool>(n, "shardable", false);
  });
  return t;
}

}  // namespace

Program parse_program(const std::string& yaml_text, const std::string& origin) {
  const YamlContext y{origin};
  const YAML::Node root = y.load(yaml_text);
  y.require_map(root, "a workload");
  y.allow_keys(root, {"name", "description", "params", "scalars", "tensors", "program", "outputs"},
               "a workload");
  Program p;
  p.name = y.required<std::string>(root, "name", "a workload");
  p.description = y.optional<std::string>(root, "description", "");
  if (const auto params = root["params"]) {
    y.require_map(params, "params");
    for (const auto& kv : params) {
      const auto key = kv.first.as<std::string>();
      const auto v = y.scalar<std::int64_t>(kv.second, "size " + key);
      if (v <= 0) y.fail(kv.second, fmt::format("size {} = {} must be positive", key, v));
      p.params[key] = v;
    }
  }
  if (const auto scalars = root["scalars"]) {
    y.require_map(scalars, "scalars");
    for (const auto& kv : scalars)
    {
      const auto key = kv.first.as<std::string>();
      const double v = y.scalar<double>(kv.second, "scalar " + key);
      if (!std::isfinite(v)) y.fail(kv.second, fmt::format("scalar {} = {} must be a finite number", key, v));
      p.scalars[key] = v;
    }
  }
  const YAML::Node tensors = root["tensors"];
  if (!tensors || !tensors.IsMap())
    y.fail(root, "a workload needs 'tensors', a map from names to {dtype, shape, layout}");
  for (const auto& kv : tensors) p.inputs.push_back(parse_tensor(y, kv.first.as<std::string>(), kv.second));
  const YAML::Node prog = root["program"];
  if (!prog || !prog.IsSequence() || prog.size() == 0)
    y.fail(root, "a workload needs 'program', a list of statements such as '- y = allreduce(sum, x)'");
  if (prog.size() > kMaxStatements)
    y.fail(prog, fmt::format("the program has {} statements, more than the limit of {}", prog.size(),
                             kMaxStatements));
  std::uint64_t seeds = 0;
  for (const auto& line : prog) {
    Stmt s;
    y.wrap(line, [&] { parse_statement(y.scalar<std::string>(line, "a statement"), s, seeds); });
    s.location = y.where(line);
    p.stmts.push_back(std::move(s));
  }
  const YAML::Node outs = root["outputs"];
  if (!outs || !outs.IsSequence()) y.fail(root, "a workload needs 'outputs', a list of value names");
  for (const auto& o : outs) p.outputs.push_back(y.scalar<std::string>(o, "output"));
  try {
    check(p);
  } catch (const LocatedError&) {
    throw;
  } catch (const UserError& e) {
    throw LocatedError(fmt::format("{}: {}", origin, e.what()));
  }
  return p;
}

Program load_program(const std::string& path) { return parse_program(read_file(path), path); }

}  // namespace coconet::model
