// SVG text generation. Coordinates are rounded to 0.1 px to keep the page
// small; axes pick decade ticks (1-2-5 within a decade when the range is
// narrow) on log scales and 1-2-5 steps on linear ones.
#include "validation/svg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/core.h>

namespace coconet::validation::svg {

namespace {

constexpr int kMarginLeft = 72;
constexpr int kMarginRight = 16;
constexpr int kMarginTop = 28;
constexpr int kMarginBottom = 44;
constexpr int kLegendWidth = 200;
constexpr int kLegendRow = 16;
constexpr double kMarkerRadius = 3.5;
constexpr int kMaxTicks = 8;
// Okabe-Ito colour-blind-safe palette (Okabe & Ito, "Color Universal Design", 2002), then extras.
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                    "#56B4E9", "#F0E442", "#000000", "#8C564B", "#7F7F7F"};

struct Range {
  double lo = 0;
  double hi = 1;
};

class Scale {
 public:
  Scale(Range r, bool log, double px_lo, double px_hi) : log_(log), px_lo_(px_lo), px_hi_(px_hi) {
    if (log && !(r.lo > 0)) r.lo = r.hi > 0 ? r.hi / 10 : 1;  // nothing positive to show: one decade
    if (log && !(r.hi > r.lo)) r.hi = r.lo * 10;
    lo_ = log ? std::log10(r.lo) : r.lo;
    hi_ = log ? std::log10(r.hi) : r.hi;
    if (!std::isfinite(lo_)) lo_ = 0;
    if (!std::isfinite(hi_) || hi_ <= lo_) hi_ = lo_ + 1;
  }
  [[nodiscard]] double operator()(double v) const {
    const double t = ((log_ ? std::log10(v) : v) - lo_) / (hi_ - lo_);
    return px_lo_ + t * (px_hi_ - px_lo_);
  }
  [[nodiscard]] std::vector<double> ticks() const { return log_ ? log_ticks() : linear_ticks(); }

 private:
  [[nodiscard]] std::vector<double> log_ticks() const {
    std::vector<double> out;
    const bool narrow = hi_ - lo_ < 2;
    for (int d = static_cast<int>(std::floor(lo_)); d <= static_cast<int>(std::ceil(hi_)); ++d)
      for (double m : narrow ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
        const double v = m * std::pow(10.0, d);
        const double lv = std::log10(v);
        if (lv >= lo_ - 1e-9 && lv <= hi_ + 1e-9) out.push_back(v);
      }
    return out;
  }
  [[nodiscard]] std::vector<double> linear_ticks() const {
    const double span = hi_ - lo_;
    double step = std::pow(10.0, std::floor(std::log10(span)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (span / (step * m) <= kMaxTicks) {
        step *= m;
        break;
      }
    std::vector<double> out;
    for (double v = std::ceil(lo_ / step) * step; v <= hi_ + 1e-9 * span; v += step) out.push_back(v);
    return out;
  }
  bool log_;
  double lo_ = 0, hi_ = 1, px_lo_, px_hi_;
};

std::string number(double v) {
  const double a = std::abs(v);
  if (a == 0) return "0";
  if (a >= 1e6 || a < 1e-2) return fmt::format("{:.0e}", v);
  if (a >= 100 || v == std::round(v)) return fmt::format("{:.0f}", v);
  return fmt::format("{:.2g}", v);
}

std::string px(double v) { return fmt::format("{:.1f}", v); }

Range padded(double lo, double hi, bool log) {
  if (!(lo < hi)) {
    lo = log ? lo / 2 : lo - 1;
    hi = log ? hi * 2 : hi + 1;
  }
  if (log) return {lo / 1.15, hi * 1.15};
  const double pad = (hi - lo) * 0.05;
  return {lo - pad, hi + pad};
}

std::string open_svg(int w, int h, const std::string& title) {
  return fmt::format(
      "<svg class=\"chart\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"{2}\">\n<text x=\"{3}\" y=\"18\" class=\"title\">{2}</text>\n",
      w, h, escape(title), kMarginLeft);
}

std::string axes_frame(const Scale& sx, const Scale& sy, const Axes& a, double x0, double x1, double y0,
                       double y1, bool y_ticks = true) {
  std::string s = fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>\n",
                              px(x0), px(y1), px(x1 - x0), px(y0 - y1));
  for (double t : sx.ticks()) {
    const double x = sx(t);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"grid\"/>", px(x), px(y0), px(y1));
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", px(x),
                     px(y0 + 14), number(t));
  }
  for (double t : y_ticks ? sy.ticks() : std::vector<double>{}) {
    const double y = sy(t);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"grid\"/>", px(x0), px(y), px(x1));
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{}</text>\n", px(x0 - 4),
                     px(y + 4), number(t));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"label\" text-anchor=\"middle\">{}</text>\n",
                   px((x0 + x1) / 2), px(y0 + 34), escape(a.x_label));
  s += fmt::format(
      "<text x=\"14\" y=\"{0}\" class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90 14 {0})\">{1}</text>\n",
      px((y0 + y1) / 2), escape(a.y_label));
  return s;
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& entries, double x, double y) {
  std::string s;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const double yy = y + static_cast<double>(i) * kLegendRow;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>", px(x), px(yy - 9),
                     entries[i].second);
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"legend\">{}</text>\n", px(x + 14), px(yy),
                     escape(entries[i].first));
  }
  return s;
}

void extend(Range& r, double v, bool& first) {
  if (first) {
    r = {v, v};
    first = false;
  } else {
    r.lo = std::min(r.lo, v);
    r.hi = std::max(r.hi, v);
  }
}

}  // namespace

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string palette(int index) {
  constexpr int n = static_cast<int>(std::size(kPalette));
  return kPalette[((index % n) + n) % n];
}

std::string line_chart(const std::string& title, const std::vector<Series>& series, const Axes& axes,
                       Size size, bool identity) {
  Range rx{1, 10}, ry{1, 10};
  bool fx = true, fy = true;
  for (const auto& s : series)
    for (const auto& p : s.points) {
      if ((axes.log_x && p.x <= 0) || (axes.log_y && p.y <= 0)) continue;
      extend(rx, p.x, fx);
      extend(ry, p.y, fy);
    }
  if (identity && !fx) {
    rx = ry = {std::min(rx.lo, ry.lo), std::max(rx.hi, ry.hi)};
  }
  const double x0 = kMarginLeft, x1 = size.width - kMarginRight - kLegendWidth;
  const double y0 = size.height - kMarginBottom, y1 = kMarginTop;
  const Scale sx(padded(rx.lo, rx.hi, axes.log_x), axes.log_x, x0, x1);
  const Scale sy(padded(ry.lo, ry.hi, axes.log_y), axes.log_y, y0, y1);
  std::string s = open_svg(size.width, size.height, title);
  s += axes_frame(sx, sy, axes, x0, x1, y0, y1);
  if (identity && !fx) {
    const Range r = padded(rx.lo, rx.hi, axes.log_x);
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"identity\"><title>y = x</title></line>\n",
                     px(sx(r.lo)), px(sy(r.lo)), px(sx(r.hi)), px(sy(r.hi)));
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& se : series) {
    std::string path;
    for (const auto& p : se.points) {
      if ((axes.log_x && p.x <= 0) || (axes.log_y && p.y <= 0)) continue;
      path += fmt::format("{}{},{}", path.empty() ? "" : " ", px(sx(p.x)), px(sy(p.y)));
    }
    if (se.lines && !path.empty())
      s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"{}/>\n", path,
                       se.color, se.dashed ? " stroke-dasharray=\"5 3\"" : "");
    for (const auto& p : se.points) {
      if ((axes.log_x && p.x <= 0) || (axes.log_y && p.y <= 0)) continue;
      s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"{}><title>{}</title></circle>\n",
                       px(sx(p.x)), px(sy(p.y)), kMarkerRadius, se.dashed ? "white" : se.color,
                       se.dashed ? fmt::format(" stroke=\"{}\"", se.color) : "", escape(p.tip));
    }
    if (!se.name.empty()) entries.emplace_back(se.name, se.color);
  }
  s += legend(entries, x1 + 12, y1 + 10);
  return s + "</svg>\n";
}

std::string bar_chart(const std::string& title, const std::vector<std::string>& series_names,
                      const std::vector<BarGroup>& groups, const std::string& y_label, double reference,
                      Size size) {
  Range ry{0, 0};
  for (const auto& g : groups)
    for (double v : g.values)
      if (std::isfinite(v)) ry = {std::min(ry.lo, v), std::max(ry.hi, v)};
  if (std::isfinite(reference)) ry = {std::min(ry.lo, reference), std::max(ry.hi, reference)};
  const double x0 = kMarginLeft, x1 = size.width - kMarginRight - kLegendWidth;
  const double y0 = size.height - kMarginBottom, y1 = kMarginTop;
  const Scale sy(padded(ry.lo, ry.hi, false), false, y0, y1);
  std::string s = open_svg(size.width, size.height, title);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>\n", px(x0), px(y1),
                   px(x1 - x0), px(y0 - y1));
  for (double t : sy.ticks()) {
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"grid\"/>", px(x0), px(sy(t)), px(x1));
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{}</text>\n", px(x0 - 4),
                     px(sy(t) + 4), number(t));
  }
  s += fmt::format(
      "<text x=\"14\" y=\"{0}\" class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90 14 {0})\">{1}</text>\n",
      px((y0 + y1) / 2), escape(y_label));
  const double group_w = groups.empty() ? 0 : (x1 - x0) / static_cast<double>(groups.size());
  const double bar_w = series_names.empty() ? 0 : group_w * 0.8 / static_cast<double>(series_names.size());
  const double zero = sy(0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double gx = x0 + static_cast<double>(g) * group_w + group_w * 0.1;
    for (std::size_t k = 0; k < groups[g].values.size(); ++k) {
      const double v = groups[g].values[k];
      if (!std::isfinite(v)) continue;
      const double top = std::min(zero, sy(v)), h = std::abs(sy(v) - zero);
      const std::string tip = k < groups[g].tips.size() ? groups[g].tips[k] : number(v);
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
                       px(gx + static_cast<double>(k) * bar_w), px(top), px(std::max(bar_w - 1, 1.0)),
                       px(std::max(h, 0.5)), palette(static_cast<int>(k)), escape(tip));
    }
    if (groups.size() <= 24)
      s += fmt::format(
          "<text x=\"{0}\" y=\"{1}\" class=\"tick\" text-anchor=\"end\" transform=\"rotate(-30 {0} {1})\">{2}</text>\n",
          px(gx + group_w * 0.4), px(y0 + 12), escape(groups[g].label));
  }
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"axis\"/>\n", px(x0), px(zero), px(x1));
  if (std::isfinite(reference))
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"identity\"/>\n", px(x0),
                     px(sy(reference)), px(x1));
  std::vector<std::pair<std::string, std::string>> entries;
  for (std::size_t k = 0; k < series_names.size(); ++k)
    entries.emplace_back(series_names[k], palette(static_cast<int>(k)));
  s += legend(entries, x1 + 12, y1 + 10);
  return s + "</svg>\n";
}

std::string gantt_chart(const std::string& title, const std::vector<TimelineBar>& bars, int width) {
  std::vector<std::string> lanes;
  std::map<std::string, int> colors;
  double end = 0;
  for (const auto& b : bars) {
    if (std::find(lanes.begin(), lanes.end(), b.lane) == lanes.end()) lanes.push_back(b.lane);
    const std::string code = b.name.substr(0, b.name.find(' '));
    colors.emplace(code, static_cast<int>(colors.size()));
    end = std::max(end, b.start_us + b.duration_us);
  }
  constexpr int kLaneHeight = 22;
  constexpr int kLaneLabel = 150;
  const int height = kMarginTop + kMarginBottom + kLaneHeight * static_cast<int>(std::max<std::size_t>(lanes.size(), 1));
  const double x0 = kLaneLabel, x1 = width - kMarginRight - kLegendWidth;
  const double y0 = height - kMarginBottom, y1 = kMarginTop;
  const Scale sx(Range{0, end > 0 ? end : 1}, false, x0, x1);
  const Scale sy(Range{0, 1}, false, y0, y1);
  std::string s = open_svg(width, height, title);
  s += axes_frame(sx, sy, Axes{"time (us)", "", false, false}, x0, x1, y0, y1, /*y_ticks=*/false);
  for (std::size_t l = 0; l < lanes.size(); ++l)
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{}</text>\n", px(x0 - 6),
                     px(y1 + static_cast<double>(l) * kLaneHeight + 15), escape(lanes[l]));
  for (const auto& b : bars) {
    const auto lane = std::find(lanes.begin(), lanes.end(), b.lane) - lanes.begin();
    const std::string code = b.name.substr(0, b.name.find(' '));
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"white\" stroke-width=\"0.5\">"
        "<title>{} @ {:.1f} us, {:.1f} us</title></rect>\n",
        px(sx(b.start_us)), px(y1 + static_cast<double>(lane) * kLaneHeight + 3),
        px(std::max(sx(b.start_us + b.duration_us) - sx(b.start_us), 0.8)), kLaneHeight - 6,
        palette(colors[code]), escape(b.name), b.start_us, b.duration_us);
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [code, idx] : colors) entries.emplace_back(code, palette(idx));
  s += legend(entries, x1 + 12, y1 + 10);
  return s + "</svg>\n";
}

}  // namespace coconet::validation::svg
