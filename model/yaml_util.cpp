// The YAML loader every front end shares (see yaml_util.h): an event pass of
// yaml-cpp's parser that counts what the text holds and stops at the first
// value past a limit, then the tree, then the checks only a tree can make
// (duplicate keys, aliases expanded).
//
// Why two passes: yaml-cpp builds a whole document's tree before returning it
// (about half a kilobyte per value), so limits checked on the tree come after
// the memory is spent (issue 34: 4.3 GB for a 16 MB file). Its event parser
// calls us per value, and an exception thrown there ends the parse at once.
#include "model/yaml_util.h"

#include <sstream>

#include <yaml-cpp/eventhandler.h>

namespace coconet::model {

namespace {

// Counts the events of a stream against the limits of model/limits.h; throws
// LocatedError with the line and column of the first value past one.
class LimitCounter final : public YAML::EventHandler {
 public:
  explicit LimitCounter(const YamlContext& ctx) : ctx_(ctx) {}

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > kMaxYamlDocuments)
      fail(mark, fmt::format("the file has more than the limit of {} YAML documents (separated by ---)",
                             kMaxYamlDocuments));
    depth_ = 0;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { value(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    value(mark);
    if (++aliases_ > kMaxYamlAliases)
      fail(mark, fmt::format("the file uses more than the limit of {} aliases (*name)", kMaxYamlAliases));
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    value(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark);
  }
  void OnMapEnd() override { --depth_; }

  [[nodiscard]] std::int64_t documents() const { return documents_; }

 private:
  void value(const YAML::Mark& mark) {
    if (++values_ > kMaxYamlNodes)
      fail(mark, fmt::format("the file has more than the limit of {} YAML values (keys, items and scalars)",
                             kMaxYamlNodes));
  }
  void open(const YAML::Mark& mark) {
    value(mark);
    if (++depth_ > kMaxYamlDepth)
      fail(mark, fmt::format("the document nests deeper than the limit of {} levels", kMaxYamlDepth));
  }
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& what) const {
    throw LocatedError(fmt::format("{}:{}:{}: {}", ctx_.origin, mark.line + 1, mark.column + 1, what));
  }

  const YamlContext& ctx_;
  std::int64_t documents_ = 0;
  std::size_t values_ = 0;
  std::int64_t aliases_ = 0;
  std::int64_t depth_ = 0;
};

// Flow collections ([...] and {...}) nested deeper than kMaxYamlDepth, found
// by a scan of the text before yaml-cpp reads it. Its scanner holds every
// token of an unclosed flow collection until it can tell whether the
// collection is a key (`[a]: b`), so 16 MiB of `[` took 55 s and 3.7 GB before
// its parser emitted a single event (measured). The scan skips quoted scalars
// and comments; a bracket inside a plain or block scalar is counted too, which
// refuses a text only where such brackets are unbalanced 64 levels deep.
void check_flow_depth(const YamlContext& ctx, const std::string& text) {
  std::int64_t depth = 0, line = 1, column = 0;
  char quote = 0;        // the quote of the scalar the scan is in, or 0
  bool comment = false;  // from a # to the end of its line
  char previous = '\n';
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      comment = false;
    } else if (comment) {
    } else if (quote != 0) {
      if (quote == '"' && c == '\\') ++i, ++column;  // an escaped character of a double-quoted scalar
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (previous == ' ' || previous == '\t' || previous == '\n')) {
      comment = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxYamlDepth)
        throw LocatedError(fmt::format("{}:{}:{}: the document nests deeper than the limit of {} levels", ctx.origin,
                                       line, column, kMaxYamlDepth));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    previous = c;
  }
}

[[noreturn]] void malformed(const YamlContext& ctx, const YAML::Exception& e) {
  throw LocatedError(fmt::format("{}:{}:{}: malformed YAML: {}", ctx.origin, e.mark.line + 1, e.mark.column + 1,
                                 e.msg));
}

}  // namespace

std::vector<YAML::Node> YamlContext::load_all(const std::string& text) const {
  if (text.size() > kMaxInputBytes)
    throw LocatedError(fmt::format("{}: the file has {} bytes, more than the limit of {} bytes", origin,
                                   text.size(), kMaxInputBytes));
  if (const std::int64_t bad = first_invalid_utf8(text); bad >= 0)
    throw LocatedError(fmt::format("{}: the file is not valid UTF-8 (byte {} is 0x{:02x}); YAML files are UTF-8 text",
                                   origin, bad, static_cast<unsigned char>(text[static_cast<std::size_t>(bad)])));
  check_flow_depth(*this, text);
  std::vector<YAML::Node> docs;
  try {
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      LimitCounter counter(*this);
      while (parser.HandleNextDocument(counter)) {
      }
    }
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    malformed(*this, e);
  }
  for (const auto& d : docs) check_structure(d);
  return docs;
}

YAML::Node YamlContext::load(const std::string& text) const {
  auto docs = load_all(text);
  if (docs.empty()) return YAML::Node();
  if (docs.size() > 1)
    fail(docs[1], fmt::format("a second YAML document (after ---); this file holds one document, not {}",
                              docs.size()));
  return docs.front();
}

void YamlContext::check_structure(const YAML::Node& root) const {
  std::vector<std::pair<YAML::Node, int>> todo{{root, 0}};
  std::size_t visited = 0;
  while (!todo.empty()) {
    if (++visited > kMaxYamlNodes)
      throw LocatedError(fmt::format("{}: the document (its aliases expanded) has more than the limit of {} "
                                     "values",
                                     origin, kMaxYamlNodes));
    const auto [n, depth] = todo.back();
    todo.pop_back();
    if (depth > kMaxYamlDepth)
      fail(n, fmt::format("the document nests deeper than the limit of {} levels", kMaxYamlDepth));
    if (n.IsMap()) {
      std::set<std::string> keys;
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) fail(kv.first, "a key must be a plain value, not empty, a list or a map");
        if (!keys.insert(kv.first.Scalar()).second)
          fail(kv.first, fmt::format("the key '{}' is given twice in the same map; give each key once",
                                     kv.first.Scalar()));
        todo.emplace_back(kv.second, depth + 1);
      }
    } else if (n.IsSequence()) {
      for (const auto& item : n) todo.emplace_back(item, depth + 1);
    }
  }
}

}  // namespace coconet::model
