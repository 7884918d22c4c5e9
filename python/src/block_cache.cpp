// python/src/block_cache.cpp — kvtk._kvtk.BlockCache: kvtk::any_block_cache (a cache of any
// online policy, chosen by name) for engines written in Python. A batched access takes a numpy
// array of uint64 keys and runs without the GIL; evictions during it are collected and handed to
// the Python on_evict callable after the batch, in eviction order.
// Threads: every method takes the object's mutex around its use of the cache, never waiting for
// it with the GIL held (the batch holds it with the GIL released; a method that finds it taken
// releases the GIL while it waits), so other Python threads keep running. A call takes the
// evictions it caused inside its own lock hold, then calls on_evict with the GIL held and the
// mutex free (on_evict may use the cache again).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string_view.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
// The light declaration: the definitions come from kvtk::policies, compiled once.
#include "kvtk/cache/any_block_cache_decl.hpp"

namespace kvtk::python {
namespace {

class py_block_cache {
  // Runs f under mu_ (called with the GIL held): when another thread holds mu_, wait for it
  // with the GIL released, so that Python threads that do not use this cache keep running.
  template <class F>
  auto locked(F&& f) const -> decltype(f()) {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      nb::gil_scoped_release release;
      lock.lock();
    }
    return f();
  }

 public:
  py_block_cache(const std::string& policy, std::uint64_t capacity,
                 std::optional<std::uint32_t> max_entries, nb::object on_evict)
      : evicted_(std::move(on_evict)) {
    try {
      cache_.emplace(policy, kvtk::any_block_cache::config{capacity, max_entries.value_or(0)},
                     [this](kvtk::block_key k, std::uint32_t) { evicted_.push(k); });
    } catch (...) {
      raise_python(std::current_exception());
    }
  }

  // hits[i] = whether keys[i] was resident when accessed (then it is, unless rejected). Runs in
  // chunks of 2^20 keys without the GIL; between chunks it reports progress(done, total) and
  // checks for Ctrl-C, so a long batch stops within a chunk's time (about 40 ms for LRU).
  nb::ndarray<nb::numpy, bool, nb::ndim<1>> access(const any_array& given, nb::object progress) {
    const block_keys keys(given, "BlockCache.access: keys");
    constexpr std::size_t chunk = std::size_t{1} << 20;
    const std::size_t n = keys.size();
    auto* hits = new std::vector<std::uint8_t>(n);
    nb::capsule owner(hits, [](void* p) noexcept { delete static_cast<std::vector<std::uint8_t>*>(p); });
    const std::uint64_t* k = keys.span().data();
    std::vector<std::uint64_t> mine;  // this call's evictions, taken under its own lock hold
    for (std::size_t at = 0; at < n; at += chunk) {
      const std::size_t end = std::min(n, at + chunk);
      {
        nb::gil_scoped_release release;
        const std::lock_guard<std::mutex> lock(mu_);
        for (std::size_t i = at; i < end; ++i) {
          (*hits)[i] = cache_->access(k[i]).result == kvtk::access_result::hit;
        }
        mine = evicted_.take();
      }
      evicted_.call(std::move(mine));
      if (!progress.is_none()) progress(end, n);
      if (end < n && PyErr_CheckSignals() != 0) throw nb::python_error();
    }
    return {reinterpret_cast<bool*>(hits->data()), {n}, owner};
  }
  bool access_one(std::uint64_t key) {
    std::vector<std::uint64_t> mine;
    const bool hit = locked([&] {
      const bool h = cache_->access(key).result == kvtk::access_result::hit;
      mine = evicted_.take();
      return h;
    });
    evicted_.call(std::move(mine));
    return hit;
  }
  // True when the key is resident afterwards (admitted now or before).
  bool insert(std::uint64_t key) {
    std::vector<std::uint64_t> mine;
    const bool in = locked([&] {
      const bool r = cache_->insert(key).result != kvtk::access_result::rejected;
      mine = evicted_.take();
      return r;
    });
    evicted_.call(std::move(mine));
    return in;
  }
  // Evicts n unpinned entries in the policy's victim order, never one of `protect`, and returns
  // their keys; all or nothing (RuntimeError when fewer than n can go).
  nb::ndarray<nb::numpy, std::uint64_t, nb::ndim<1>> evict(
      std::size_t n, std::optional<any_array> protect_given) {
    std::optional<block_keys> protect;
    if (protect_given) protect.emplace(*protect_given, "BlockCache.evict: protected");
    std::vector<kvtk::block_key> held;  // protected keys pinned for the call
    std::vector<std::uint64_t> mine;
    const bool done = locked([&] {
      if (protect) {
        for (const std::uint64_t key : protect->span()) {
          if (cache_->pin(key)) held.push_back(key);
        }
      }
      const bool ok = cache_->evict(n);
      for (const kvtk::block_key k : held) cache_->unpin(k);
      mine = evicted_.take();
      return ok;
    });
    if (!done) {
      throw std::runtime_error("BlockCache.evict: cannot free " + std::to_string(n) +
                               " entries without evicting pinned or protected ones");
    }
    auto* victims = new std::vector<std::uint64_t>(evicted_.call(std::move(mine)));
    nb::capsule owner(victims, [](void* p) noexcept { delete static_cast<std::vector<std::uint64_t>*>(p); });
    return {victims->data(), {victims->size()}, owner};
  }
  bool contains(std::uint64_t key) const { return locked([&] { return cache_->contains(key); }); }
  bool erase(std::uint64_t key) {
    return locked([&] { return cache_->erase(key) == kvtk::erase_result::erased; });
  }
  bool pin(std::uint64_t key) { return locked([&] { return cache_->pin(key); }); }
  bool unpin(std::uint64_t key) { return locked([&] { return cache_->unpin(key); }); }
  std::size_t size() const { return locked([&] { return cache_->size(); }); }
  std::uint64_t capacity() const { return locked([&] { return cache_->capacity(); }); }
  std::string policy() const { return std::string(cache_->policy()); }  // fixed at construction
  nb::dict stats() const {
    const kvtk::cache_stats st = locked([&] { return cache_->stats(); });
    nb::dict d;
    d["hits"] = st.hits;
    d["misses"] = st.misses;
    return d;
  }

 private:

  mutable std::mutex mu_;
  eviction_queue evicted_;
  std::optional<kvtk::any_block_cache> cache_;
};

}  // namespace

void bind_block_cache(nb::module_& m) {
  nb::class_<py_block_cache>(m, "BlockCache",
                             "A block cache of any online kvtk policy (lru, arc, s3fifo, ...).")
      .def(nb::init<const std::string&, std::uint64_t, std::optional<std::uint32_t>, nb::object>(),
           nb::arg("policy"), nb::arg("capacity"), nb::arg("max_entries").none() = nb::none(),
           nb::arg("on_evict").none() = nb::none())
      .def("access", &py_block_cache::access, nb::arg("keys"),
           nb::arg("progress").none() = nb::none(),
           "Accesses each key in order (a hit updates the policy, a miss admits the key); "
           "returns whether each was a hit. Runs without the GIL, in chunks of 2^20 keys: "
           "progress(done, total) after each, and Ctrl-C stops it between chunks.")
      .def("access_one", &py_block_cache::access_one, nb::arg("key"))
      .def("insert", &py_block_cache::insert, nb::arg("key"),
           "Admits a missing key without counting a miss; True when it is resident afterwards.")
      .def("evict", &py_block_cache::evict, nb::arg("n"), nb::arg("protected").none() = nb::none(),
           "Evicts n unpinned entries in the policy's victim order (never one of the "
           "`protected` keys) and returns their keys; all or nothing: RuntimeError when fewer "
           "than n can go.")
      .def("contains", &py_block_cache::contains, nb::arg("key"))
      .def("__contains__", &py_block_cache::contains, nb::arg("key"))
      .def("erase", &py_block_cache::erase, nb::arg("key"), "False when missing or pinned.")
      .def("pin", &py_block_cache::pin, nb::arg("key"), "A pinned key is never evicted.")
      .def("unpin", &py_block_cache::unpin, nb::arg("key"))
      .def("__len__", &py_block_cache::size)
      .def_prop_ro("capacity", &py_block_cache::capacity)
      .def_prop_ro("policy", &py_block_cache::policy)
      .def_prop_ro("stats", &py_block_cache::stats);
}

}  // namespace kvtk::python
