#include "api/trace_anonymize.hpp"

#include <sys/stat.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "api/keyed_permutation.hpp"
#include "api/options_json.hpp"
#include "api/trace_options.hpp"
#include "formats/trace_limits.hpp"
#include "formats/writers.hpp"
#include "util/output_file.hpp"

namespace kvtk::sim {

nlohmann::json to_json(const trace_anonymize_options& o) {
  return {{"trace", o.trace},         {"format", o.format},
          {"block_tokens", o.block_tokens}, {"output", o.output},
          {"to", o.to},               {"salt_file", o.salt_file},
          {"time_shift_s", o.time_shift_s}, {"time_zero", o.time_zero},
          {"force", o.force}};
}

trace_anonymize_options trace_anonymize_options_from_json(const nlohmann::json& j) {
  trace_anonymize_options o;
  detail::options_reader in(j, "trace anonymize options");
  in.get("trace", o.trace);
  in.get("format", o.format);
  in.get("block_tokens", o.block_tokens);
  in.get("output", o.output);
  in.get("to", o.to);
  in.get("salt_file", o.salt_file);
  in.get("time_shift_s", o.time_shift_s);
  in.get("time_zero", o.time_zero);
  in.get("force", o.force);
  in.finish();
  return o;
}

namespace {

constexpr std::size_t min_salt_bytes = 16, max_salt_bytes = std::size_t{1} << 20;
constexpr std::uint8_t key_domain = 'k', session_domain = 's', tenant_domain = 't',
                       request_domain = 'r';

std::vector<std::uint8_t> read_salt(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw usage_error("--salt-file: cannot open '" + path + "'");
  if (!S_ISREG(st.st_mode)) throw usage_error("--salt-file: '" + path + "' is not a regular file");
  if (static_cast<std::size_t>(st.st_size) < min_salt_bytes ||
      static_cast<std::size_t>(st.st_size) > max_salt_bytes) {
    throw usage_error("--salt-file: '" + path + "' holds " + std::to_string(st.st_size) +
                      " bytes; a salt is 16 bytes to 1 MiB (e.g. head -c 32 /dev/urandom > F)");
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<std::uint8_t> salt((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && in.fail()) throw usage_error("--salt-file: cannot read '" + path + "'");
  if (salt.size() < min_salt_bytes) throw usage_error("--salt-file: '" + path + "' was cut short");
  return salt;
}

std::vector<std::uint8_t> random_salt() {
  std::random_device os;  // the OS's entropy source (/dev/urandom on Linux)
  std::vector<std::uint8_t> salt(32);
  for (std::size_t i = 0; i < salt.size(); i += 4) {
    const std::uint32_t v = os();
    for (std::size_t b = 0; b < 4; ++b) salt[i + b] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  return salt;
}

std::string hex64(std::uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

}  // namespace

void validate(trace_anonymize_options& o) {
  check_request_format(o.format);
  if (o.output.empty()) throw usage_error("-o: give the output file, or - for stdout");
  if (!std::isfinite(o.time_shift_s) || std::fabs(o.time_shift_s) > limits::max_arrival_s) {
    char given[32];
    std::snprintf(given, sizeof given, "%g", o.time_shift_s);
    throw usage_error(std::string("--time-shift: ") + given +
                      " s is not a finite number of seconds within 1e12");
  }
  if (!o.salt_file.empty()) (void)read_salt(o.salt_file);
  resolve_trace(o.trace, o.format, o.block_tokens);  // trace_error: exit 1 via main
  if (o.to.empty()) {
    const bool kvtb_name =
        o.output.size() >= 5 && o.output.compare(o.output.size() - 5, 5, ".kvtb") == 0;
    o.to = kvtb_name ? "kvtb" : o.format;
  }
  const auto f = parse_format_name(o.to);
  if (!f || *f == trace_format::bailian) {
    throw usage_error("--to: cannot write '" + o.to +
                      "' (writable: kvtk kvtb mooncake ids oracle-general; a Bailian input needs "
                      "--to)");
  }
  note_input(o.trace);
  if (!o.salt_file.empty()) note_input(o.salt_file);
  check_output(o.output, o.force, "-o");
}

trace_anonymize_result run(trace_anonymize_options o, const progress_callback& progress) {
  validate(o);
  trace_anonymize_result r;
  r.random_salt = o.salt_file.empty();
  const keyed_permutation perm(r.random_salt ? random_salt() : read_salt(o.salt_file));
  auto writer = trace_writer::open(o.output, *parse_format_name(o.to), o.block_tokens, o.force);
  detail::progress_relay bar(progress, 0);
  std::vector<kvtk::block_key> keys;
  std::vector<std::uint64_t> joins;
  std::unordered_set<std::uint64_t> sessions;
  std::unordered_map<std::string, std::string> tenant_names;  // original -> opaque
  std::unordered_set<std::string> opaque_taken;
  std::optional<double> origin;
  for_each_request(o.trace, *parse_format_name(o.format), o.block_tokens, {}, nullptr,
                   [&](const request_record& in) {
                     request_record rec = in;
                     keys.assign(in.keys.begin(), in.keys.end());
                     for (auto& k : keys) k = perm(k, key_domain);
                     rec.keys = keys;
                     // Request ids and parents through one map, so every parent still names
                     // its request.
                     if (in.request_id) rec.request_id = perm(*in.request_id, request_domain);
                     if (in.parent) rec.parent = perm(*in.parent, request_domain);
                     joins.assign(in.joins.begin(), in.joins.end());
                     for (auto& j : joins) j = perm(j, request_domain);
                     rec.joins = joins;
                     if (in.session) {
                       rec.session = perm(*in.session, session_domain);
                       sessions.insert(*in.session);
                     }
                     if (!in.tenant.empty()) {
                       auto it = tenant_names.find(std::string(in.tenant));
                       if (it == tenant_names.end()) {
                         std::string name = "t" + hex64(perm.name_bits(in.tenant, tenant_domain));
                         if (!opaque_taken.insert(name).second) {
                           // 64 keyed bits: two names meeting here is a 2^-64 event, but merging
                           // two tenants would change results, so it is refused, not ignored.
                           throw trace_error(o.trace, in.line, "two tenant names got one opaque id");
                         }
                         it = tenant_names.emplace(std::string(in.tenant), std::move(name)).first;
                       }
                       rec.tenant = it->second;
                     }
                     if (in.arrival_s) {
                       if (o.time_zero && !origin) origin = *in.arrival_s;
                       const double t = *in.arrival_s - (o.time_zero ? *origin : 0.0) + o.time_shift_s;
                       if (!(t >= 0) || t > limits::max_arrival_s) {
                         throw trace_error(o.trace, in.line,
                                           "the arrival shifted by --time-shift is " +
                                               std::to_string(t) + " s, outside [0, 1e12] s");
                       }
                       rec.arrival_s = t;
                     }
                     try {
                       writer->add(rec);
                     } catch (const trace_error& e) {
                       throw trace_error(o.trace, in.line,
                                         e.what() + std::string(e.what()).find(": ", 0) + 2);
                     }
                     ++r.requests;
                     r.keys += keys.size();
                     bar.add(1);
                   });
  writer->finish();
  r.sessions = sessions.size();
  r.tenants = tenant_names.size();
  r.from = o.format;
  r.to = o.to;
  r.output = o.output;
  r.block_tokens = o.block_tokens;
  return r;
}

nlohmann::json to_json(const trace_anonymize_result& r) {
  return {{"requests", r.requests}, {"keys", r.keys},         {"sessions", r.sessions},
          {"tenants", r.tenants},   {"random_salt", r.random_salt}, {"from", r.from},
          {"to", r.to},             {"output", r.output},     {"block_tokens", r.block_tokens}};
}

std::string to_text(const trace_anonymize_result& r) {
  std::string s = "kvtk trace anonymize: wrote " + std::to_string(r.requests) + " requests (" +
                  std::to_string(r.keys) + " block keys re-keyed, " + std::to_string(r.sessions) +
                  " sessions and " + std::to_string(r.tenants) + " tenants mapped to opaque ids) to " +
                  r.output + " (" + r.to + ")\n";
  if (r.random_salt) {
    s += "kvtk trace anonymize: the salt was random and is not kept: another trace anonymized "
         "later will not share keys with this one (give --salt-file to anonymize several "
         "consistently)\n";
  }
  return s;
}

}  // namespace kvtk::sim
