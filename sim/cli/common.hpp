// sim/cli/common.hpp — the command-line plumbing every kvtk subcommand shares: parsing argv into
// options (Boost.Program_options lives in cli/ only) and writing outputs by the --force rule.
// What a command computes from its options is in api/ (api/trace_options.hpp for the shared parts).
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <string>
#include <vector>

#include "api/trace_options.hpp"
#include "api/usage_error.hpp"

namespace kvtk::sim::cli {

using kvtk::sim::usage_error;  // api/usage_error.hpp: the CLI reports it with exit code 2

/// Parses the arguments of subcommand `cmd` (e.g. "trace stats") into vm and runs check(), which
/// validates values and may throw usage_error. Returns -1 to go on, 0 after printing --help, or 2
/// after printing "kvtk <cmd>: <problem>" for a usage error.
/// A command with a "json", "csv" or "output" option also gets --force. After check(), every
/// other string option naming a file is noted as an input (note_input) and every output option
/// is checked (check_output): an existing file without --force, or an input, is a usage error.
int parse_command(
    const std::string& cmd, const boost::program_options::options_description& opts,
    const std::vector<std::string>& args, boost::program_options::variables_map& vm,
    const std::function<void()>& check,
    const boost::program_options::positional_options_description* positional = nullptr);

/// Adds the trace-input options every trace command shares: --trace (required), --format
/// (default auto), --block-tokens (default 0 = the trace's).
void add_trace_options(boost::program_options::options_description& opts, std::string& trace,
                       std::string& format, std::uint32_t& block_tokens);

/// Prints each of a result's warnings on stderr as "kvtk <cmd>: <warning>".
void show_warnings(const std::string& cmd, const std::vector<std::string>& warnings);

/// Whether this command was given --force (set by parse_command; README "Output files").
bool& force_outputs() noexcept;

/// Writes text to the file `where`, or to stdout for "-", by the output rules
/// (util/output_file.hpp) with force_outputs(). Throws output_error naming the file.
void write_to(const std::string& where, const std::string& text);

}  // namespace kvtk::sim::cli
