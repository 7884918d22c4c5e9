#include "formats/writers.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "formats/kvtb.hpp"
#include "util/output_file.hpp"

namespace kvtk::sim {
namespace {

void append_u64(std::string& s, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}
void append_double(std::string& s, double v) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  s.append(buf, r.ptr);
}

class jsonl_writer final : public trace_writer {
 public:
  jsonl_writer(const std::string& path, trace_format f, std::uint32_t bt, bool force)
      : file_(std::make_unique<output_file>(path, force)), kvtk_(f == trace_format::kvtk), bt_(bt) {
    header();
  }
  jsonl_writer(std::ostream& out, trace_format f, std::uint32_t bt)
      : stream_(&out), kvtk_(f == trace_format::kvtk), bt_(bt) {
    header();
  }
  void add(const request_record& r) override {
    check_parents(r, "(input)");
    if (!kvtk_ && r.block_tokens != bt_) {
      throw trace_error("(input)", r.line,
                        "request has " + std::to_string(r.block_tokens) +
                            "-token blocks; the mooncake format needs one block size (" +
                            std::to_string(bt_) + ")");
    }
    line_.clear();
    line_ += '{';
    if (r.arrival_s) {
      if (kvtk_) {
        line_ += "\"arrival_s\": ";
        append_double(line_, *r.arrival_s);
      } else {
        line_ += "\"timestamp\": ";
        append_u64(line_, static_cast<std::uint64_t>(std::llround(*r.arrival_s * 1000.0)));
      }
      line_ += ", ";
    }
    line_ += "\"input_length\": ";
    append_u64(line_, r.input_length);
    if (r.output_length) {
      line_ += ", \"output_length\": ";
      append_u64(line_, *r.output_length);
    }
    if (kvtk_) {
      if (r.session) {
        line_ += ", \"session\": ";
        append_u64(line_, *r.session);
      }
      if (!r.tenant.empty()) {
        line_ += ", \"tenant\": \"";
        line_.append(r.tenant);  // raw JSON string contents: already escaped
        line_ += '"';
      }
      if (r.priority) {
        line_ += ", \"priority\": ";
        append_u64(line_, *r.priority);
      }
      if (r.block_tokens != bt_) {
        line_ += ", \"block_tokens\": ";
        append_u64(line_, r.block_tokens);
      }
      if (r.request_id) {
        line_ += ", \"id\": ";
        append_u64(line_, *r.request_id);
      }
      if (r.parent && r.joins.empty()) {
        line_ += ", \"parent\": ";
        append_u64(line_, *r.parent);
      } else if (r.parent) {  // fan-in: every parent, the one it continues first
        line_ += ", \"parent\": [";
        append_u64(line_, *r.parent);
        for (const std::uint64_t j : r.joins) {
          line_ += ", ";
          append_u64(line_, j);
        }
        line_ += ']';
      }
      if (r.turn) {
        line_ += ", \"turn\": ";
        append_u64(line_, *r.turn);
      }
      if (!r.kind.empty()) {
        line_ += ", \"kind\": \"";
        line_.append(r.kind);  // raw JSON string contents: already escaped
        line_ += '"';
      }
      if (r.tool_s) {
        line_ += ", \"tool_s\": ";
        append_double(line_, *r.tool_s);
      }
    }
    line_ += ", \"hash_ids\": [";
    for (std::size_t i = 0; i < r.keys.size(); ++i) {
      if (i) line_ += ", ";
      append_u64(line_, r.keys[i]);
    }
    line_ += "]}\n";
    emit();
  }
  void finish() override {
    if (file_) {
      file_->commit();
    } else if (!stream_->flush()) {
      throw std::runtime_error("error writing the output stream");
    }
  }

 private:
  void header() {
    if (!kvtk_) return;
    line_ = "{\"kvtk_trace\": 1, \"block_tokens\": ";
    append_u64(line_, bt_);
    line_ += "}\n";
    emit();
  }
  void emit() {
    if (file_) {
      file_->write(line_);
    } else {
      stream_->write(line_.data(), static_cast<std::streamsize>(line_.size()));
    }
  }
  std::unique_ptr<output_file> file_;
  std::ostream* stream_ = nullptr;
  bool kvtk_;
  std::uint32_t bt_;
  std::string line_;
};

class ids_writer final : public trace_writer {
 public:
  ids_writer(const std::string& path, bool force) : file_(path, force) {}
  void add(const request_record& r) override {
    line_.clear();
    for (auto k : r.keys) {
      append_u64(line_, k);
      line_ += '\n';
    }
    file_.write(line_);
  }
  void finish() override { file_.commit(); }

 private:
  output_file file_;
  std::string line_;
};

class oracle_general_writer final : public trace_writer {
 public:
  oracle_general_writer(const std::string& path, bool force) : file_(path, force) {}
  void add(const request_record& r) override {
    const auto time = static_cast<std::uint32_t>(
        r.arrival_s ? std::min(std::floor(*r.arrival_s), 4294967295.0)
                    : static_cast<double>(requests_ & 0xffffffffu));
    for (auto k : r.keys) records_.push_back({k, time, r.block_tokens});
    ++requests_;
  }
  void finish() override {
    std::unordered_map<std::uint64_t, std::uint64_t> next_seen;
    std::vector<std::int64_t> next(records_.size(), -1);
    for (std::size_t i = records_.size(); i-- > 0;) {
      const auto [it, fresh] = next_seen.try_emplace(records_[i].id, i);
      if (!fresh) {
        next[i] = static_cast<std::int64_t>(it->second);
        it->second = i;
      }
    }
    std::vector<unsigned char> buf;
    buf.reserve(24 * 4096);
    auto flush = [&] {
      file_.write(buf.data(), buf.size());
      buf.clear();
    };
    for (std::size_t i = 0; i < records_.size(); ++i) {
      unsigned char rec[24];
      std::memcpy(rec, &records_[i].time, 4);  // little-endian hosts only (static_assert in kvtb)
      std::memcpy(rec + 4, &records_[i].id, 8);
      std::memcpy(rec + 12, &records_[i].size, 4);
      std::memcpy(rec + 16, &next[i], 8);
      buf.insert(buf.end(), rec, rec + 24);
      if (buf.size() >= 24 * 4096) flush();
    }
    flush();
    file_.commit();
  }

 private:
  struct record {
    std::uint64_t id;
    std::uint32_t time, size;
  };
  output_file file_;
  std::vector<record> records_;
  std::uint64_t requests_ = 0;
};

class kvtb_file_writer final : public trace_writer {
 public:
  kvtb_file_writer(const std::string& path, std::uint32_t bt, bool force) : w_(path, bt, force) {}
  void add(const request_record& r) override { w_.add(r); }
  void finish() override { w_.finish(); }

 private:
  kvtb::writer w_;
};

}  // namespace

std::unique_ptr<trace_writer> trace_writer::to_stream(std::ostream& out, trace_format f,
                                                      std::uint32_t block_tokens) {
  if (f != trace_format::mooncake && f != trace_format::kvtk) {
    throw std::runtime_error("only the JSONL formats (kvtk, mooncake) can go to a stream");
  }
  return std::make_unique<jsonl_writer>(out, f, block_tokens);
}

std::unique_ptr<trace_writer> trace_writer::open(const std::string& path, trace_format f,
                                                 std::uint32_t block_tokens, bool force) {
  switch (f) {
    case trace_format::mooncake:
    case trace_format::kvtk:
      return std::make_unique<jsonl_writer>(path, f, block_tokens, force);
    case trace_format::ids:
      return std::make_unique<ids_writer>(path, force);
    case trace_format::oracle_general:
      return std::make_unique<oracle_general_writer>(path, force);
    case trace_format::kvtb:
      return std::make_unique<kvtb_file_writer>(path, block_tokens, force);
    case trace_format::bailian:
      break;
  }
  throw std::runtime_error(
      "cannot write the bailian format: its content ids cannot be recovered from prefix keys "
      "(write kvtk, which keeps the chained keys)");
}

}  // namespace kvtk::sim
