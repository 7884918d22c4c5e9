#include "cli/common.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/output_file.hpp"

namespace kvtk::sim::cli {

namespace {

// Boost reads "-1" into an unsigned option as 2^32-1 or 2^64-1 (lexical_cast wraps), which then
// passes range checks or blames the wrong input. Every unsigned option is refused a sign here.
void reject_negative_counts(const boost::program_options::options_description& opts,
                            const boost::program_options::parsed_options& parsed) {
  namespace po = boost::program_options;
  for (const auto& o : parsed.options) {
    const po::option_description* d = opts.find_nothrow(o.string_key, false);
    if (d == nullptr) continue;
    const po::value_semantic* sem = d->semantic().get();
    const bool is_unsigned = dynamic_cast<const po::typed_value<std::uint32_t>*>(sem) != nullptr ||
                             dynamic_cast<const po::typed_value<std::uint64_t>*>(sem) != nullptr ||
                             dynamic_cast<const po::typed_value<std::uint16_t>*>(sem) != nullptr;
    if (!is_unsigned) continue;
    for (const std::string& v : o.value) {
      const auto first = v.find_first_not_of(" \t");
      if (first != std::string::npos && (v[first] == '-' || v[first] == '+')) {
        throw usage_error("--" + o.string_key + ": must be a non-negative whole number, got '" + v +
                          "'");
      }
    }
  }
}

}  // namespace

int parse_command(const std::string& cmd, const boost::program_options::options_description& opts,
                  const std::vector<std::string>& args, boost::program_options::variables_map& vm,
                  const std::function<void()>& check,
                  const boost::program_options::positional_options_description* positional) {
  namespace po = boost::program_options;
  // Every command that writes files takes --force, with one meaning (README "Output files").
  const bool writes = opts.find_nothrow("json", false) != nullptr ||
                      opts.find_nothrow("csv", false) != nullptr ||
                      opts.find_nothrow("output", false) != nullptr;
  po::options_description all;
  all.add(opts);
  po::options_description output_opts("Output files");
  if (writes) {
    output_opts.add_options()("force", "replace an existing output file (never an input)");
    all.add(output_opts);
  }
  try {
    // Boost.Program_options formats its messages by replacing %name% placeholders and loops
    // forever when the text it substitutes contains one (found by fuzz_options: an argument
    // "--x%canonical_option%" hung every command). Such an argument is refused first.
    for (const std::string& a : args) {
      // Every "%name%" anywhere in the argument (each '%' may open one).
      for (auto open = a.find('%'); open != std::string::npos; open = a.find('%', open + 1)) {
        const auto close = a.find('%', open + 1);
        if (close == std::string::npos) break;
        if (close > open + 1 &&
            a.find_first_not_of("abcdefghijklmnopqrstuvwxyz_", open + 1) == close) {
          throw usage_error("an argument contains '" + a.substr(open, close - open + 1) +
                            "', which the option parser cannot report; remove it");
        }
      }
    }
    po::command_line_parser parser(args);
    parser.options(all);
    if (positional != nullptr) parser.positional(*positional);
    const po::parsed_options parsed = parser.run();
    reject_negative_counts(all, parsed);
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << all;
      return 0;
    }
    po::notify(vm);
    force_outputs() = vm.count("force") != 0;
    check();
    // Every file option is an input unless it is an output; then no output may name an input.
    static const char* const outputs[] = {"json", "csv", "output"};
    auto is_output = [](const std::string& name) {
      for (const char* o : outputs) {
        if (name == o) return true;
      }
      return false;
    };
    for (const auto& [name, value] : vm) {
      if (is_output(name)) continue;
      if (const auto* text = boost::any_cast<std::string>(&value.value())) note_input(*text);
      if (const auto* list = boost::any_cast<std::vector<std::string>>(&value.value())) {
        for (const auto& item : *list) note_input(item);
      }
    }
    for (const char* o : outputs) {
      if (!vm.count(o)) continue;
      if (const auto* text = boost::any_cast<std::string>(&vm[o].value())) {
        check_output(*text, force_outputs(), o == std::string("output") ? "-o" : "--" + std::string(o));
      }
    }
  } catch (const po::error& e) {
    std::cerr << "kvtk " << cmd << ": " << e.what() << "\n(try 'kvtk " << cmd << " --help')\n";
    return 2;
  } catch (const usage_error& e) {
    std::cerr << "kvtk " << cmd << ": " << e.what() << "\n";
    return 2;
  } catch (const output_refused& e) {
    std::cerr << "kvtk " << cmd << ": " << e.what() << "\n";
    return 2;
  }
  return -1;
}

bool& force_outputs() noexcept {
  static bool force = false;
  return force;
}

void add_trace_options(boost::program_options::options_description& opts, std::string& trace,
                       std::string& format, std::uint32_t& block_tokens) {
  namespace po = boost::program_options;
  opts.add_options()("trace", po::value(&trace)->required(), "trace file (any format kvtk reads)")(
      "format", po::value(&format)->default_value("auto"),
      "mooncake | bailian | kvtk | kvtb | oracle-general | ids | auto (detected from content)")(
      "block-tokens", po::value(&block_tokens)->default_value(0),
      "tokens per block (0 = the trace's: kvtb/kvtk header, else 512 Mooncake, 16 Bailian, 64 "
      "kvtk, 1 flat)");
}

void show_warnings(const std::string& cmd, const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) std::cerr << "kvtk " << cmd << ": " << w << "\n";
}

void write_to(const std::string& where, const std::string& text) {
  write_output(where, text, force_outputs());
}

}  // namespace kvtk::sim::cli
