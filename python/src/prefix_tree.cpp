// python/src/prefix_tree.cpp — kvtk._kvtk.PrefixTree: kvtk::prefix::prefix_tree with a leaf
// order chosen by name, as an engine's radix cache uses it (SGLang's RadixCache shape): a
// request matches its prefix, locks it while it runs, inserts the rest, and unlocks it when
// done. Keys are prefix keys (a key names a block with its whole prefix). Evictions are handed to
// the Python on_evict callable after each call, in order.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "bindings.hpp"
#include "kvtk/detail/engaged_variant.hpp"
#include "kvtk/prefix/leaf_registry.hpp"
#include "kvtk/prefix/prefix_tree.hpp"

namespace kvtk::python {
namespace {

using keys_array = any_array;

template <class List>
struct tree_variant;
template <class... Ls>
struct tree_variant<kvtk::type_list<Ls...>> {
  using type = std::variant<std::monostate, std::unique_ptr<kvtk::prefix::prefix_tree<Ls>>...>;
};

class py_prefix_tree {
  // Dispatch comes first: the operations below deduce their return types from it.
  template <class F>
  decltype(auto) with(F&& f) {
    return kvtk::detail::visit_engaged(tree_, [&](auto& p) -> decltype(auto) { return f(*p); });
  }
  template <class F>
  decltype(auto) with(F&& f) const {
    return kvtk::detail::visit_engaged(tree_, [&](const auto& p) -> decltype(auto) {
      return f(std::as_const(*p));
    });
  }

 public:
  py_prefix_tree(const std::string& order, std::uint32_t capacity, nb::object on_evict)
      : evicted_(std::move(on_evict)) {
    try {
      kvtk::prefix::visit_leaf_policy(order, [&]<class L>() {
        if constexpr (requires { L::offline; }) {  // the leaf order's own trait, not its name
          throw std::invalid_argument("PrefixTree: order '" + std::string(L::name) +
                                      "' is offline (replay only)");
        } else {
          tree_.template emplace<std::unique_ptr<kvtk::prefix::prefix_tree<L>>>(
              std::make_unique<kvtk::prefix::prefix_tree<L>>(capacity));
        }
      });
    } catch (...) {
      raise_python(std::current_exception());
    }
    order_ = order;
  }

  // Leading keys resident as a path from the root (no state change).
  std::uint32_t match(const keys_array& given) const {
    const block_keys keys(given, "PrefixTree.match: keys");
    return with([&](const auto& t) { return t.match(keys.span()).length; });
  }

  // The request's access: touches the resident prefix, inserts the rest below it (evicting
  // unlocked leaves as needed). Returns how many leading keys were resident before.
  std::uint32_t insert(const keys_array& given) {
    const block_keys keys(given, "PrefixTree.insert: keys");
    const auto k = keys.span();
    const std::uint32_t hit = with([&](auto& t) {
      const auto m = t.match(k);
      t.lock_and_touch(m.node, m.length, [](std::uint32_t) { return kvtk::access_hint{}; });
      const auto r = t.insert(m.node, k.subspan(m.length),
                              [this](kvtk::block_key key, std::uint32_t, auto&&) {
                                evicted_.push(key);
                              });
      t.unlock(r.node);
      return m.length;
    });
    evicted_.deliver();
    return hit;
  }

  // Locks the resident prefix of keys (never evicted while locked); returns its length.
  std::uint32_t lock(const keys_array& given) {
    const block_keys keys(given, "PrefixTree.lock: keys");
    return with([&](auto& t) {
      const auto m = t.match(keys.span());
      t.lock(m.node);
      return m.length;
    });
  }
  // Releases one lock on the resident prefix of keys. False when it was not locked.
  bool unlock(const keys_array& given) {
    const block_keys keys(given, "PrefixTree.unlock: keys");
    return with([&](auto& t) {
      const auto m = t.match(keys.span());
      return m.length == 0 || t.unlock(m.node);
    });
  }
  std::size_t size() const { return with([](const auto& t) { return t.size(); }); }
  std::uint32_t capacity() const { return with([](const auto& t) { return t.capacity(); }); }
  std::size_t evictable() const { return with([](const auto& t) { return t.evictable(); }); }
  const std::string& order() const { return order_; }

 private:


  eviction_queue evicted_;
  typename tree_variant<kvtk::prefix::all_leaf_policies>::type tree_;
  std::string order_;
};

}  // namespace

void bind_prefix_tree(nb::module_& m) {
  nb::class_<py_prefix_tree>(m, "PrefixTree",
                             "A radix-tree prefix cache with a leaf eviction order by name.")
      .def(nb::init<const std::string&, std::uint32_t, nb::object>(), nb::arg("order") = "lru",
           nb::arg("capacity"), nb::arg("on_evict").none() = nb::none())
      .def("match", &py_prefix_tree::match, nb::arg("keys"),
           "Leading keys resident as a path from the root (no state change).")
      .def("insert", &py_prefix_tree::insert, nb::arg("keys"),
           "A request's access: touches the resident prefix and inserts the rest, evicting "
           "unlocked leaves as needed; returns how many leading keys were resident.")
      .def("lock", &py_prefix_tree::lock, nb::arg("keys"),
           "Locks the resident prefix (never evicted while locked); returns its length.")
      .def("unlock", &py_prefix_tree::unlock, nb::arg("keys"))
      .def("__len__", &py_prefix_tree::size)
      .def_prop_ro("capacity", &py_prefix_tree::capacity)
      .def_prop_ro("evictable", &py_prefix_tree::evictable)
      .def_prop_ro("order", &py_prefix_tree::order);
}

}  // namespace kvtk::python
