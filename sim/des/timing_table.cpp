// sim/des/timing_table.cpp — the timing table's CSV parser (format: des/timing.hpp and
// docs/simulate.md "Timing"). Every error names the file, the line and the reason.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "des/timing.hpp"

namespace kvtk::sim::des {
namespace {

constexpr std::string_view header = "kind,batch,tokens_per_request,context_tokens,ms";
constexpr const char* field_names[] = {"batch", "tokens_per_request", "context_tokens", "ms"};

struct row {
  int kind;                 // 0 prefill, 1 decode
  std::array<double, 3> v;  // batch, tokens_per_request, context_tokens
  double s;
  std::uint64_t line;
};

std::string_view trim(std::string_view f) {
  while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.remove_prefix(1);
  while (!f.empty() && (f.back() == ' ' || f.back() == '\t' || f.back() == '\r'))
    f.remove_suffix(1);
  return f;
}

// A field as quoted in a message: at most 40 characters.
std::string clip(std::string_view f) {
  return f.size() > 40 ? std::string(f.substr(0, 40)) + "..." : std::string(f);
}

std::string show(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// One numeric field: a finite number >= 0, whole unless it is `ms`, within [min, max].
double number(std::string_view f, int field, double min, double max, const std::string& file,
              std::uint64_t line) {
  const std::string name = std::string("'") + field_names[field] + "'";
  double v = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (f.empty() || ec != std::errc() || end != f.data() + f.size() || !std::isfinite(v)) {
    throw timing_table_error(file, line, name + " is not a number: '" + clip(f) + "'");
  }
  if (v < 0) throw timing_table_error(file, line, name + " is negative: " + clip(f));
  if (field < 3 && v != std::floor(v)) {
    throw timing_table_error(file, line, name + " must be a whole number: " + clip(f));
  }
  if (v < min || v > max) {
    throw timing_table_error(
        file, line, name + " must be in [" + show(min) + ", " + show(max) + "]: " + clip(f));
  }
  return v;
}

row parse_row(std::string_view text, const std::string& file, std::uint64_t line) {
  std::string_view f[5];
  std::size_t n = 0;
  for (std::size_t start = 0;; ++n) {
    const std::size_t comma = text.find(',', start);
    if (n < 5)
      f[n] = trim(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (++n != 5) {
    throw timing_table_error(
        file, line, "expected 5 fields (" + std::string(header) + "), got " + std::to_string(n));
  }
  row r{};
  r.line = line;
  if (f[0] == "prefill") {
    r.kind = 0;
  } else if (f[0] == "decode") {
    r.kind = 1;
  } else {
    throw timing_table_error(file, line, "unknown kind '" + clip(f[0]) + "' (prefill decode)");
  }
  constexpr double most = 1099511627776.0;  // 2^40 tokens or requests
  r.v[0] = number(f[1], 0, 1, most, file, line);
  r.v[1] = number(f[2], 1, 1, most, file, line);
  r.v[2] = number(f[3], 2, 0, most, file, line);
  r.s = number(f[4], 3, 0, 1e12, file, line) / 1000.0;
  if (r.kind == 1 && r.v[1] != 1) {
    throw timing_table_error(file, line,
                             "a decode row's 'tokens_per_request' must be 1, not " + clip(f[2]));
  }
  return r;
}

// The rows of one kind (sorted by batch, tokens_per_request, context_tokens; no duplicates)
// nested as the lookup walks them (timing_table::points).
timing_table::points make_points(const std::vector<row>& rows) {
  timing_table::points p;
  if (rows.empty()) return p;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    const bool new_batch = i == 0 || r.v[0] != rows[i - 1].v[0];
    if (new_batch) {
      p.batch.push_back(r.v[0]);
      p.tokens_first.push_back(static_cast<std::uint32_t>(p.tokens.size()));
    }
    if (new_batch || r.v[1] != rows[i - 1].v[1]) {
      p.tokens.push_back(r.v[1]);
      p.rows_first.push_back(static_cast<std::uint32_t>(p.context.size()));
    }
    p.context.push_back(r.v[2]);
    p.s.push_back(r.s);
  }
  p.tokens_first.push_back(static_cast<std::uint32_t>(p.tokens.size()));
  p.rows_first.push_back(static_cast<std::uint32_t>(p.context.size()));
  std::size_t distinct[3];
  for (int d = 0; d < 3; ++d) {
    std::vector<double> v;
    for (const row& r : rows) v.push_back(r.v[d]);
    std::sort(v.begin(), v.end());
    distinct[d] = static_cast<std::size_t>(std::unique(v.begin(), v.end()) - v.begin());
    p.varies[d] = distinct[d] > 1;
    p.largest[d] = v.back();
  }
  p.complete = rows.size() == distinct[0] * distinct[1] * distinct[2];
  return p;
}

}  // namespace

timing_table timing_table::parse(std::string_view text, const std::string& name) {
  std::vector<row> rows;
  std::uint64_t line = 0;
  bool seen_header = false;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t nl = std::min(text.find('\n', start), text.size());
    const std::string_view l = trim(text.substr(start, nl - start));
    start = nl + 1;
    ++line;
    if (l.empty() || l.front() == '#') continue;
    if (!seen_header) {
      if (l != header) {
        throw timing_table_error(
            name, line,
            "the header must be exactly '" + std::string(header) + "', not '" + clip(l) + "'");
      }
      seen_header = true;
      continue;
    }
    rows.push_back(parse_row(l, name, line));
  }
  if (rows.empty()) {
    throw timing_table_error(name, line, seen_header ? "no rows after the header" : "empty table");
  }
  if (rows.size() > (std::uint64_t{1} << 31)) {  // the lookup's slices index rows in 32 bits
    throw timing_table_error(name, line, "more than 2^31 rows");
  }
  std::sort(rows.begin(), rows.end(), [](const row& a, const row& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.v != b.v ? a.v < b.v : a.line < b.line;
  });
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].kind == rows[i - 1].kind && rows[i].v == rows[i - 1].v) {
      throw timing_table_error(name, rows[i].line,
                               std::string("duplicate ") + (rows[i].kind ? "decode" : "prefill") +
                                   " row (batch " + show(rows[i].v[0]) + ", tokens_per_request " +
                                   show(rows[i].v[1]) + ", context_tokens " + show(rows[i].v[2]) +
                                   ") of line " + std::to_string(rows[i - 1].line));
    }
  }
  const auto split =
      std::partition_point(rows.begin(), rows.end(), [](const row& r) { return r.kind == 0; });
  timing_table t;
  t.source_ = name;
  t.prefill_ = make_points({rows.begin(), split});
  t.decode_ = make_points({split, rows.end()});
  return t;
}

timing_table timing_table::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw timing_table_error(path, 0, "is a directory, not a timing table");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw timing_table_error(path, 0, "cannot open the timing table");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw timing_table_error(path, 0, "cannot read the timing table");
  return parse(text.str(), path);
}

}  // namespace kvtk::sim::des
