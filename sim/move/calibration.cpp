#include "move/calibration.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace kvtk::sim::move {
namespace {

std::string kind_of_endpoint(const std::string& s) { return pool_kind(s); }

double field(const nlohmann::json& o, const char* name, const std::string& where) {
  if (!o.contains(name) || !o[name].is_number()) {
    throw std::runtime_error(where + ": '" + name + "' missing or not a number");
  }
  const double v = o[name].get<double>();
  if (!std::isfinite(v)) throw std::runtime_error(where + ": '" + name + "' is not finite");
  return v;
}

}  // namespace

std::string pool_kind(const std::string& n, bool hbm_is_dram) {
  if (n == "hbm" || n == "gpu" || n.rfind("hbm", 0) == 0) return hbm_is_dram ? "dram" : "hbm";
  if (n == "dram" || n == "host" || n == "cpu") return "dram";
  if (n == "ssd" || n == "nvme" || n == "file" || n == "disk") return "file";
  return "";
}

calibration calibration::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("calibration") || !j["calibration"].is_object()) {
    throw std::runtime_error(path + ": no \"calibration\" object (write one with `kvtk move bench "
                                    "--json` or cuda/validate.sh)");
  }
  calibration c;
  c.source = path;
  for (const auto& [key, fit] : j["calibration"].items()) {
    const std::string where = path + ": calibration \"" + key + "\"";
    if (fit.is_null()) continue;  // the bench could not fit this group (documented)
    if (!fit.is_object()) throw std::runtime_error(where + ": not an object");
    const auto space = key.find(' ');
    if (space == std::string::npos) throw std::runtime_error(where + ": key is not 'PATH MECHANISM'");
    std::string p = key.substr(0, space);
    link_fit f;
    f.mechanism = key.substr(space + 1);
    if (p == "h2d") p = "dram->hbm";
    if (p == "d2h") p = "hbm->dram";
    const auto arrow = p.find("->");
    if (arrow != std::string::npos) {
      f.from = kind_of_endpoint(p.substr(0, arrow));
      f.to = kind_of_endpoint(p.substr(arrow + 2));
    }
    f.model.alpha_s = field(fit, "alpha_s", where);
    f.model.beta_s = field(fit, "beta_s", where);
    f.model.bytes_per_s = field(fit, "bytes_per_s", where);
    if (f.model.bytes_per_s < 0) throw std::runtime_error(where + ": bytes_per_s < 0");
    if (f.model.alpha_s < 0 || f.model.beta_s < 0) {
      f.clamped = true;
      f.model.alpha_s = std::max(0.0, f.model.alpha_s);
      f.model.beta_s = std::max(0.0, f.model.beta_s);
    }
    c.fits.push_back(std::move(f));
  }
  return c;
}

std::optional<link_fit> calibration::find(const std::string& from, const std::string& to,
                                          std::uint64_t block_bytes,
                                          const std::string& mechanism) const {
  std::optional<link_fit> best;
  double best_t = std::numeric_limits<double>::infinity();
  for (const auto& f : fits) {
    if (f.from != from || f.to != to || from.empty() || to.empty()) continue;
    if (!mechanism.empty() && f.mechanism != mechanism) continue;
    const double t = f.model.predict(256, 256.0 * static_cast<double>(block_bytes));
    if (t < best_t) {
      best_t = t;
      best = f;
    }
  }
  return best;
}

nlohmann::json apply_calibration(kvtk::tier::hierarchy_config& cfg, const calibration& cal,
                                 const std::string& mechanism, bool hbm_is_dram) {
  if (!mechanism.empty()) {
    std::string known;
    bool found = false;
    for (const auto& f : cal.fits) {
      found = found || f.mechanism == mechanism;
      if (known.find(f.mechanism) == std::string::npos) known += (known.empty() ? "" : ", ") + f.mechanism;
    }
    if (!found) {
      throw std::runtime_error(cal.source + ": no fit for mechanism '" + mechanism + "' (has: " +
                               known + ")");
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t s = 1; s < cfg.tiers.size(); ++s) {
    auto& t = cfg.tiers[s];
    const std::string below = pool_kind(t.name, hbm_is_dram);
    const std::string above = pool_kind(cfg.tiers[s - 1].name, hbm_is_dram);
    nlohmann::json row = {{"link", cfg.tiers[s - 1].name + "<->" + t.name}};
    const auto up = cal.find(below, above, cfg.block_bytes, mechanism);
    const auto down = cal.find(above, below, cfg.block_bytes, mechanism);
    auto describe = [](const link_fit& f) {
      return nlohmann::json{{"path", f.from + "->" + f.to},     {"mechanism", f.mechanism},
                            {"alpha_s", f.model.alpha_s},       {"beta_s", f.model.beta_s},
                            {"bytes_per_s", f.model.bytes_per_s}, {"clamped", f.clamped}};
    };
    if (up) {
      t.latency_s = up->model.alpha_s;
      t.read_per_block_s = up->model.beta_s;
      t.read_bytes_per_s = up->model.bytes_per_s;
      row["read"] = describe(*up);
    }
    if (down) {
      t.write_latency_s = down->model.alpha_s;
      t.write_per_block_s = down->model.beta_s;
      t.write_bytes_per_s = down->model.bytes_per_s;
      row["write"] = describe(*down);
    }
    row["calibrated"] = up.has_value() || down.has_value();
    out.push_back(row);
  }
  return out;
}

}  // namespace kvtk::sim::move
