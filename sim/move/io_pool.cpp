#include "move/io_pool.hpp"

namespace kvtk::sim::move {

io_pool::io_pool(unsigned threads) {
  workers_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

io_pool::~io_pool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

// Takes tasks until none is left (mu_ held on entry and exit).
void io_pool::drain() {
  std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
  while (job_ != nullptr && next_ < tasks_) {
    const std::size_t i = next_++;
    const auto* f = job_;
    lock.unlock();
    try {
      (*f)(i);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    if (--unfinished_ == 0) done_.notify_all();
  }
  lock.release();
}

void io_pool::work() {
  std::unique_lock<std::mutex> lock(mu_);
  std::uint64_t seen = 0;
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    lock.release();
    drain();
    lock = std::unique_lock<std::mutex>(mu_, std::adopt_lock);
  }
}

void io_pool::run(std::size_t tasks, const std::function<void(std::size_t)>& f) {
  if (tasks == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &f;
  tasks_ = tasks;
  next_ = 0;
  unfinished_ = tasks;
  error_ = nullptr;
  ++generation_;
  wake_.notify_all();
  lock.release();
  drain();  // the caller works too
  lock = std::unique_lock<std::mutex>(mu_, std::adopt_lock);
  done_.wait(lock, [&] { return unfinished_ == 0; });
  job_ = nullptr;
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace kvtk::sim::move
