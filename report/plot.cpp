#include "report/plot.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "data/text_file.h"

namespace loom::data {

namespace {

const RGB kBlack{0, 0, 0}, kGrid{225, 225, 225}, kFrame{90, 90, 90};

// matplotlib's default colour cycle ("tab10").
RGB series_colour(size_t i) {
  static constexpr RGB kTab10[10] = {
      {31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
      {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  return kTab10[i % 10];
}

struct Range {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
  bool empty() const { return !(lo <= hi); }
};

// "Nice" tick values in [lo, hi]: multiples of 1, 2 or 5 x 10^k, at most about `count` of them.
std::vector<double> nice_ticks(double lo, double hi, int64_t count) {
  const double raw = (hi - lo) / static_cast<double>(std::max<int64_t>(count, 2));
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

// Ticks for a log10 axis spanning [lo, hi] (in log10 units), returned in log10 units:
// decades, else 1-2-5 multiples, else linear nice values.
std::vector<double> log_ticks(double lo, double hi, int64_t count) {
  std::vector<double> decades, multiples;
  for (double k = std::floor(lo); k <= std::ceil(hi); ++k)
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = k + std::log10(m);
      if (t < lo - 1e-9 || t > hi + 1e-9) continue;
      (m == 1.0 ? decades : multiples).push_back(t);
    }
  multiples.insert(multiples.end(), decades.begin(), decades.end());
  std::sort(multiples.begin(), multiples.end());
  if (multiples.size() >= 2 && static_cast<int64_t>(multiples.size()) <= count) return multiples;
  if (decades.size() >= 2) return decades;
  std::vector<double> ticks;
  for (double v : nice_ticks(std::pow(10.0, lo), std::pow(10.0, hi), count))
    if (v > 0) ticks.push_back(std::log10(v));
  return ticks;
}

// A finite range of nonzero width: a single value v becomes [v - 0.5, v + 0.5] (or +-10%).
Range widened(Range r, double pad_fraction) {
  if (r.empty()) return {0.0, 1.0};
  if (r.hi == r.lo) {
    const double half = r.lo == 0.0 ? 0.5 : std::abs(r.lo) * 0.1;
    return {r.lo - half, r.hi + half};
  }
  const double pad = (r.hi - r.lo) * pad_fraction;
  return {r.lo - pad, r.hi + pad};
}

std::string tick_label(double v) { return fmt::format("{:.4g}", v); }

// Where a series' y goes on the axis: y itself, or log10(y) on a log axis (nullopt: skipped).
std::optional<double> axis_y(double y, bool log_y) {
  if (log_y) return y > 0 && std::isfinite(y) ? std::optional(std::log10(y)) : std::nullopt;
  return std::isfinite(y) ? std::optional(y) : std::nullopt;
}

// Sizes in pixels, scaled with the text: scale 2 on a canvas of at least 600 x 400.
struct Style {
  int64_t scale, pad, text_h, tick_len;
  explicit Style(const PlotOptions& o)
      : scale(o.width >= 600 && o.height >= 400 ? 2 : 1),
        pad(4 * scale),
        text_h(text_size("0")[1] * scale),
        tick_len(3 * scale) {}
};

// The plot area [x0, x1] x [y0, y1] in pixels, the data ranges it shows and their ticks.
struct Axes {
  int64_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  Range xr, yr;  // yr in log10 units on a log axis
  std::vector<double> x_ticks, y_ticks;
  bool log_y = false;
  int64_t px(double x) const {
    return x0 + std::llround((x - xr.lo) / (xr.hi - xr.lo) * static_cast<double>(x1 - x0));
  }
  int64_t py(double y) const {
    return y1 - std::llround((y - yr.lo) / (yr.hi - yr.lo) * static_cast<double>(y1 - y0));
  }
  std::string y_text(double t) const { return tick_label(log_y ? std::pow(10.0, t) : t); }
};

// Ranges and ticks from the drawable points; margins for the title, the tick labels and the
// axis labels (the y label is written upwards in the left margin).
Axes place_axes(const std::vector<Series>& series, const PlotOptions& options, const Style& st) {
  Axes a;
  a.log_y = options.log_y;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size(); ++i)
      if (const auto y = axis_y(s.y[i], options.log_y); y && std::isfinite(s.x[i]))
        a.xr.add(s.x[i]), a.yr.add(*y);
  a.xr = widened(a.xr, 0.0), a.yr = widened(a.yr, 0.05);
  const int64_t max_x_ticks = std::max<int64_t>(options.width / (90 * st.scale), 2);
  const int64_t max_y_ticks = std::max<int64_t>(options.height / (40 * st.scale), 2);
  a.x_ticks = nice_ticks(a.xr.lo, a.xr.hi, max_x_ticks);
  a.y_ticks = options.log_y ? log_ticks(a.yr.lo, a.yr.hi, max_y_ticks)
                            : nice_ticks(a.yr.lo, a.yr.hi, max_y_ticks);
  int64_t y_tick_w = 0;
  for (double t : a.y_ticks) y_tick_w = std::max(y_tick_w, text_size(a.y_text(t), st.scale)[0]);
  const int64_t last_x_tick_w =
      text_size(tick_label(a.x_ticks.empty() ? 0 : a.x_ticks.back()), st.scale)[0];
  a.x0 =
      st.pad + (options.y_label.empty() ? 0 : st.text_h + st.pad) + y_tick_w + st.pad + st.tick_len;
  a.x1 = options.width - 1 - std::max(3 * st.pad, last_x_tick_w / 2 + st.pad);
  a.y0 = st.pad + (options.title.empty() ? 0 : st.text_h + st.pad) + st.pad;
  a.y1 = options.height - 1 -
         (st.tick_len + 2 * st.pad + st.text_h +
          (options.x_label.empty() ? 0 : st.text_h + st.pad) + st.pad);
  LOOM_CHECK(a.x1 - a.x0 >= 20 && a.y1 - a.y0 >= 20,
             "plot_lines: '{}': no room for the axes in {} x {}", options.title, options.width,
             options.height);
  return a;
}

// Grid lines, ticks and their labels, the frame, the title and the axis labels.
void draw_frame(Image& image, const Axes& a, const PlotOptions& options, const Style& st) {
  const int64_t s = st.scale;
  for (double t : a.x_ticks) {
    const int64_t x = a.px(t);
    draw_line(image, x, a.y0, x, a.y1, kGrid);
    draw_line(image, x, a.y1, x, a.y1 + st.tick_len, kFrame);
    const auto size = text_size(tick_label(t), s);
    draw_text(image, x - size[0] / 2, a.y1 + st.tick_len + st.pad, tick_label(t), kBlack, s);
  }
  for (double t : a.y_ticks) {
    const int64_t y = a.py(t);
    draw_line(image, a.x0, y, a.x1, y, kGrid);
    draw_line(image, a.x0 - st.tick_len, y, a.x0, y, kFrame);
    const auto size = text_size(a.y_text(t), s);
    draw_text(image, a.x0 - st.tick_len - st.pad - size[0], y - size[1] / 2, a.y_text(t), kBlack,
              s);
  }
  draw_rect(image, a.x0, a.y0, a.x1, a.y1, kFrame);
  const auto title = text_size(options.title, s);
  draw_text(image, (options.width - title[0]) / 2, st.pad, options.title, kBlack, s);
  const auto xl = text_size(options.x_label, s);
  draw_text(image, a.x0 + (a.x1 - a.x0 - xl[0]) / 2, options.height - st.pad - xl[1],
            options.x_label, kBlack, s);
  if (!options.y_label.empty()) {
    const auto yl = text_size(options.y_label, s);
    Image label(yl[0], yl[1], 3, 255);
    draw_text(label, 0, 0, options.y_label, kBlack, s);
    const Image up = rotate_left(label);
    for (int64_t y = 0; y < up.height; ++y)
      for (int64_t x = 0; x < up.width; ++x)
        if (up.at(x, y)[0] == 0)
          set_pixel(image, st.pad + x, a.y0 + (a.y1 - a.y0 - up.height) / 2 + y, kBlack);
  }
}

using Legend = std::vector<std::pair<std::string, RGB>>;

// The curves, one colour each in order (series with nothing to draw take none); a point with
// no drawable neighbour is a small square. Returns the legend entries of the named ones.
Legend draw_curves(Image& image, const Axes& a, const std::vector<Series>& series,
                   const Style& st) {
  Legend legend;
  size_t drawn = 0;
  for (const Series& sr : series) {
    const RGB colour = series_colour(drawn);
    auto point = [&](size_t i) -> std::optional<std::pair<int64_t, int64_t>> {
      const auto y = axis_y(sr.y[i], a.log_y);
      if (!y || !std::isfinite(sr.x[i])) return std::nullopt;
      return std::pair{a.px(sr.x[i]), a.py(*y)};
    };
    bool any = false;
    for (size_t i = 0; i < sr.x.size(); ++i) {
      const auto p = point(i);
      if (!p) continue;
      any = true;
      const auto prev = i > 0 ? point(i - 1) : std::nullopt;
      const auto next = i + 1 < sr.x.size() ? point(i + 1) : std::nullopt;
      const int64_t r = 2 * st.scale;
      if (prev)
        draw_line(image, prev->first, prev->second, p->first, p->second, colour, st.scale);
      else if (!next)
        fill_rect(image, p->first - r, p->second - r, p->first + r, p->second + r, colour);
    }
    if (!any) continue;
    ++drawn;
    if (!sr.name.empty()) legend.emplace_back(sr.name, colour);
  }
  return legend;
}

// The legend box, in the corner of the axes where it hides the fewest curve pixels (top right
// on a tie).
void draw_legend(Image& image, const Axes& a, const Legend& legend, const Style& st) {
  if (legend.empty()) return;
  const int64_t s = st.scale, pad = st.pad, swatch = 16 * s, row_h = st.text_h + pad;
  int64_t name_w = 0;
  for (const auto& [name, colour] : legend) name_w = std::max(name_w, text_size(name, s)[0]);
  const int64_t w = pad + swatch + pad + name_w + pad;
  const int64_t h = pad + static_cast<int64_t>(legend.size()) * row_h;
  auto curve_pixels = [&](int64_t cx, int64_t cy) {
    int64_t n = 0;
    for (int64_t y = std::max<int64_t>(cy, 0); y <= std::min(cy + h, image.height - 1); ++y)
      for (int64_t x = std::max<int64_t>(cx, 0); x <= std::min(cx + w, image.width - 1); ++x) {
        const uint8_t* p = image.at(x, y);
        n += !(p[0] == p[1] && p[1] == p[2]);  // the curves are the only coloured pixels
      }
    return n;
  };
  int64_t lx = 0, ly = 0, fewest = -1;
  for (const auto& [cx, cy] : {std::pair{a.x1 - pad - w, a.y0 + pad},
                               {a.x1 - pad - w, a.y1 - pad - h},
                               {a.x0 + pad, a.y0 + pad},
                               {a.x0 + pad, a.y1 - pad - h}})
    if (const int64_t n = curve_pixels(cx, cy); fewest < 0 || n < fewest)
      lx = cx, ly = cy, fewest = n;
  fill_rect(image, lx, ly, lx + w, ly + h, {255, 255, 255});
  draw_rect(image, lx, ly, lx + w, ly + h, kFrame);
  for (size_t i = 0; i < legend.size(); ++i) {
    const int64_t y = ly + pad + static_cast<int64_t>(i) * row_h;
    draw_line(image, lx + pad, y + st.text_h / 2, lx + pad + swatch, y + st.text_h / 2,
              legend[i].second, s);
    draw_text(image, lx + 2 * pad + swatch, y, legend[i].first, kBlack, s);
  }
}

}  // namespace

Image plot_lines(const std::vector<Series>& series, const PlotOptions& options) {
  LOOM_CHECK(options.width >= 160 && options.height >= 120,
             "plot_lines: '{}': size {} x {} is below 160 x 120", options.title, options.width,
             options.height);
  for (const Series& s : series)
    LOOM_CHECK(s.x.size() == s.y.size(), "plot_lines: series '{}' has {} x but {} y values", s.name,
               s.x.size(), s.y.size());
  const Style style(options);
  const Axes axes = place_axes(series, options, style);
  Image image(options.width, options.height, 3, 255);
  draw_frame(image, axes, options, style);
  const Legend legend = draw_curves(image, axes, series, style);
  draw_legend(image, axes, legend, style);
  return image;
}

void save_plot(const std::string& path, const std::vector<Series>& series,
               const PlotOptions& options) {
  write_png(plot_lines(series, options), path);
}

void save_plots(const std::string& path,
                const std::vector<std::pair<std::vector<Series>, PlotOptions>>& panels) {
  LOOM_CHECK(!panels.empty(), "save_plots: '{}': no panels", path);
  std::vector<Image> images;
  int64_t width = 0, height = 0;
  for (const auto& [series, options] : panels) {
    images.push_back(plot_lines(series, options));
    width += images.back().width, height = std::max(height, images.back().height);
  }
  Image row(width, height, 3, 255);
  for (int64_t i = 0, x = 0; i < static_cast<int64_t>(images.size()); x += images[i++].width)
    paste(row, images[i], x, 0);
  write_png(row, path);
}

// --- CSV logs ---------------------------------------------------------------

namespace {

std::string join(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line += ',';
    line += fields[i];
  }
  return line;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma - start));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

// The number in `field` (surrounding spaces allowed), or nullopt.
std::optional<double> parse_number(std::string_view field) {
  while (!field.empty() && (field.front() == ' ' || field.front() == '\t')) field.remove_prefix(1);
  while (!field.empty() && (field.back() == ' ' || field.back() == '\t' || field.back() == '\r'))
    field.remove_suffix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size()) return std::nullopt;
  return v;
}

std::string_view without_cr(std::string_view line) {
  return !line.empty() && line.back() == '\r' ? line.substr(0, line.size() - 1) : line;
}

// The header line and the complete rows of an existing log whose step is <= last_step, as
// written (a last line without its '\n', cut short by a crash, is dropped).
std::string kept_rows(const std::string& path, const std::string& header_line, int64_t last_step) {
  const std::string text = read_file_bytes(path, "CsvLog");
  std::string kept = header_line + "\n";
  int64_t line_number = 0;
  for (size_t start = 0, newline; (newline = text.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    const std::string_view line = without_cr(std::string_view(text).substr(start, newline - start));
    ++line_number;
    if (line_number == 1) {
      LOOM_CHECK(line == header_line, "CsvLog: '{}' line 1: header is '{}', expected '{}'", path,
                 line, header_line);
      continue;
    }
    if (line.empty()) continue;
    const auto step = parse_number(line.substr(0, line.find(',')));
    LOOM_CHECK(step.has_value(), "CsvLog: '{}' line {}: the first field of '{}' is not a step",
               path, line_number, line);
    if (*step <= static_cast<double>(last_step)) kept.append(line).append("\n");
  }
  LOOM_CHECK(line_number >= 1, "CsvLog: '{}' has no header line, expected '{}'", path, header_line);
  return kept;
}

}  // namespace

CsvLog::CsvLog(const std::string& path, std::vector<std::string> header,
               std::optional<int64_t> resume_after_step)
    : path_(path), header_(std::move(header)) {
  LOOM_CHECK(!header_.empty(), "CsvLog: '{}': empty header", path_);
  for (const std::string& name : header_)
    LOOM_CHECK(!name.empty() && name.find_first_of(",\r\n") == std::string::npos,
               "CsvLog: '{}': column name '{}' is empty or holds a comma or line break", path_,
               name);
  if (path_.empty()) return;  // writes nothing
  const std::string header_line = join(header_);
  const bool resume = resume_after_step && std::filesystem::exists(path_);
  write_file_atomic(path_,
                    resume ? kept_rows(path_, header_line, *resume_after_step) : header_line + "\n",
                    "CsvLog");
  out_.open(path_, std::ios::binary | std::ios::app);
  LOOM_CHECK(out_.good(), "CsvLog: cannot open '{}' for appending", path_);
}

void CsvLog::row(const std::vector<double>& values) {
  LOOM_CHECK(values.size() == header_.size(), "CsvLog: '{}': row of {} values, header has {}",
             path_, values.size(), header_.size());
  std::string line;
  for (size_t i = 0; i < values.size(); ++i) {  // "{}": the shortest text that reads back
    if (i > 0) line += ',';
    line += fmt::format("{}", values[i]);
  }
  if (path_.empty()) return;
  out_ << line << '\n';
  out_.flush();
  LOOM_CHECK(out_.good(), "CsvLog: error while writing '{}'", path_);
}

std::vector<double> CsvTable::column(const std::string& name) const {
  const auto it = std::find(header.begin(), header.end(), name);
  LOOM_CHECK(it != header.end(), "CsvTable::column: no column '{}' (columns: {})", name,
             join(header));
  const size_t c = static_cast<size_t>(it - header.begin());
  std::vector<double> values;
  values.reserve(rows.size());
  for (const auto& row : rows) values.push_back(row[c]);
  return values;
}

Series CsvTable::series(const std::string& x, const std::string& y, std::string name,
                        double scale) const {
  const std::vector<double> xs = column(x), ys = column(y);
  Series s{name.empty() ? y : std::move(name), {}, {}};
  for (size_t i = 0; i < ys.size(); ++i)
    if (!std::isnan(ys[i])) s.x.push_back(xs[i]), s.y.push_back(scale * ys[i]);
  return s;
}

CsvTable read_csv(const std::string& path) {
  LineReader reader(path, "read_csv");
  CsvTable table;
  for (std::string_view name : split_fields(without_cr(reader.next("a header line"))))
    table.header.emplace_back(name);
  while (!reader.at_end()) {
    const std::string_view line = without_cr(reader.next("a row"));
    if (line.empty()) continue;
    const auto fields = split_fields(line);
    if (fields.size() != table.header.size())
      reader.fail(fmt::format("{} fields, the header has {}", fields.size(), table.header.size()));
    std::vector<double> row;
    for (std::string_view field : fields) {
      const auto v = parse_number(field);
      if (!v) reader.fail(fmt::format("'{}' is not a number", field));
      row.push_back(*v);
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace loom::data
