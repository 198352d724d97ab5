// Inline SVG charts for the HTML report, written as text with no script and no
// external reference: line charts (log or linear axes), scatter plots with a
// y = x line, grouped bar charts and a Gantt timeline. Each returns one
// well-formed <svg> element; hovering a mark shows its <title>.
#pragma once

#include <string>
#include <vector>

#include "validation/results.h"

namespace coconet::validation::svg {

// Escapes &, <, >, " and ' for XML text and attribute values.
[[nodiscard]] std::string escape(const std::string& text);

// A colour from a fixed palette that stays distinguishable in print, by index.
[[nodiscard]] std::string palette(int index);

struct Point {
  double x = 0;
  double y = 0;
  std::string tip;  // shown on hover
};

struct Series {
  std::string name;
  std::string color;
  std::vector<Point> points;
  bool dashed = false;  // predicted series are dashed, measured solid
  bool lines = true;    // false: markers only (a scatter)
};

struct Axes {
  std::string x_label;
  std::string y_label;
  bool log_x = true;
  bool log_y = true;
};

struct Size {
  int width = 640;
  int height = 360;
};

// Series over shared axes, with a legend; `identity` draws the y = x line.
[[nodiscard]] std::string line_chart(const std::string& title, const std::vector<Series>& series,
                                     const Axes& axes, Size size = {}, bool identity = false);

struct BarGroup {
  std::string label;
  std::vector<double> values;     // one per series
  std::vector<std::string> tips;  // one per value
};

// Grouped vertical bars on a linear axis that includes zero (negative values
// hang below it); `reference` draws a horizontal line at that value (e.g. 1.0
// for a speed-up), NaN for none.
[[nodiscard]] std::string bar_chart(const std::string& title, const std::vector<std::string>& series_names,
                                    const std::vector<BarGroup>& groups, const std::string& y_label,
                                    double reference, Size size = {});

// The simulator's timeline: one row per lane, bars coloured by stage code.
[[nodiscard]] std::string gantt_chart(const std::string& title, const std::vector<TimelineBar>& bars,
                                      int width = 960);

}  // namespace coconet::validation::svg
