// sim/move/io_pool.hpp — a small persistent thread pool for the file tier's reads and writes
// (and parallel DRAM copies): run(tasks, f) calls f(0..tasks-1) on the workers and the calling
// thread and returns when all are done. Workers live as long as the pool, so a transfer pays a
// wake-up, not a thread creation (~20 us each, which would dominate small transfers).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvtk::sim::move {

class io_pool {
 public:
  /// `threads` workers besides the caller (0: the caller does everything).
  explicit io_pool(unsigned threads);
  ~io_pool();
  io_pool(const io_pool&) = delete;
  io_pool& operator=(const io_pool&) = delete;

  /// Effects: f(i) for every i in [0, tasks), spread over the workers and the caller; returns
  /// when all have returned. The first exception a task throws is rethrown here (the other tasks
  /// still run). Not reentrant.
  void run(std::size_t tasks, const std::function<void(std::size_t)>& f);
  [[nodiscard]] unsigned threads() const noexcept { return static_cast<unsigned>(workers_.size()); }

 private:
  void work();
  void drain();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t tasks_ = 0, next_ = 0, unfinished_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace kvtk::sim::move
