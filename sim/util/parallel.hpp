// sim/util/parallel.hpp — runs n independent work items on up to `threads` threads (the calling
// thread included), each item once, in no fixed order. The first exception any item throws stops
// the others after their current item and is rethrown to the caller. When the system refuses a
// thread (a process limit), the threads already running, the caller's included, do the rest.
// (The replay jobs, the parallel JSONL parse and the parallel oracleGeneral read use it.)
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace kvtk::sim::detail {

/// Calls item(i) for every i in [0, n). Throws: the first exception an item threw.
template <class Item>
void parallel_for(std::size_t threads, std::size_t n, Item&& item) {
  std::atomic<std::size_t> cursor{0};
  std::exception_ptr failure;
  std::mutex failure_lock;
  auto worker = [&] {
    try {
      for (std::size_t i; (i = cursor.fetch_add(1)) < n;) item(i);
    } catch (...) {
      const std::lock_guard<std::mutex> hold(failure_lock);
      if (!failure) failure = std::current_exception();
      cursor = n;  // the other workers stop after their current item
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(std::min(threads, n));
  try {
    for (std::size_t w = 1; w < std::min(threads, n); ++w) pool.emplace_back(worker);
  } catch (const std::system_error&) {
    // No more threads: the items are pulled from the cursor, so the running workers take them.
  }
  worker();
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kvtk::sim::detail
