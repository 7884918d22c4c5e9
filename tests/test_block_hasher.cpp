// Engine-compatible block keys (kvtk/prefix/block_hasher.hpp, vllm_hash.hpp, sglang_hash.hpp):
// every vector of tests/data/engine_hash_vectors.json, which tools/engine-check/gen_hash_vectors.py
// computed with vLLM's and SGLang's own functions, reproduced byte for byte; SHA-256 against the
// FIPS 180-2 examples; the pickle and CBOR writers on their own; the prefix_trace builder.
#include <catch2/catch.hpp>
#include <random>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvtk/detail/cbor.hpp"
#include "kvtk/detail/pickle.hpp"
#include "kvtk/detail/sha256.hpp"
#include "kvtk/detail/xxh3.hpp"
#include "kvtk/prefix/block_hasher.hpp"
#include "kvtk/prefix/mrc.hpp"
#include "engine_vectors.hpp"


namespace {

using namespace kvtk::prefix;
using json = nlohmann::json;

using engine_vectors::expand;
using engine_vectors::vectors;

std::vector<std::int64_t> sequence(const std::string& name) {
  return expand(vectors().at("sequences").at(name));
}

std::string hex(std::span<const std::uint8_t> b) { return block_digest::of(b).hex(); }

std::string repeat(const json& s) {
  if (s.is_string()) return s.get<std::string>();
  std::string out;
  for (int i = 0; i < s.at("count").get<int>(); ++i) out += s.at("unit").get<std::string>();
  return out;
}

std::vector<std::string> hexes(const std::vector<block_digest>& d) {
  std::vector<std::string> out;
  for (const auto& x : d) out.push_back(x.hex());
  return out;
}

kvtk::detail::sha256_digest digest32(const std::string& h) {
  const block_digest d = block_digest::from_hex(h);
  REQUIRE(d.size == 32);
  kvtk::detail::sha256_digest out{};
  std::copy_n(d.data.begin(), 32, out.begin());
  return out;
}

}  // namespace

TEST_CASE("sha256: FIPS 180-2 examples", "[hasher]") {
  using kvtk::detail::sha256;
  CHECK(hex(sha256::of("abc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(sha256::of("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256::of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  sha256 h;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(chunk);
  CHECK(hex(h.final()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Constant evaluation.
  static_assert(sha256::of("abc")[0] == 0xba && sha256::of("abc")[31] == 0xad);
}

TEST_CASE("sha256: the SHA-NI path equals the portable one", "[hasher]") {
  // Where the CPU has SHA-NI, sha256 uses it; force_portable() takes the portable code. Random
  // messages of every length class, in one update and in pieces. (Without SHA-NI both sides are
  // the portable code and the check is trivially true; the FIPS examples cover that path.)
  using kvtk::detail::sha256;
  std::uint64_t x = 88172645463325252ull;
  for (std::size_t len = 0; len < 700; len += (len < 200 ? 1 : 37)) {
    std::vector<std::uint8_t> msg(len);
    for (auto& b : msg) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = static_cast<std::uint8_t>(x);
    }
    sha256 fast, portable;
    portable.force_portable();
    fast.update(msg);
    for (std::size_t at = 0; at < len; at += 61) portable.update(std::span(msg).subspan(at, std::min<std::size_t>(61, len - at)));
    INFO("length " << len);
    CHECK(fast.final() == portable.final());
  }
#ifdef KVTK_SHA256_SHANI
  INFO("SHA-NI on this CPU: " << kvtk::detail::sha256_has_shani());
#endif
}

TEST_CASE("sha256: any split of the input gives the one-shot digest", "[hasher]") {
  using kvtk::detail::sha256;
  std::vector<std::uint8_t> msg(300);
  for (std::size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<std::uint8_t>(i * 7 + 3);
  for (std::size_t len : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 119u, 120u, 128u, 300u}) {
    const auto whole = sha256::of(std::span(msg).first(len));
    for (std::size_t cut = 0; cut <= len; cut += 13) {
      sha256 h;
      h.update(std::span(msg).first(cut));
      h.update(std::span(msg).subspan(cut, len - cut));
      CHECK(h.final() == whole);
    }
    sha256 h;
    h.update(std::span(msg).first(len));
    (void)h.final();
    h.reset();
    h.update(std::span(msg).first(len));
    CHECK(h.final() == whole);
  }
}

TEST_CASE("xxh3_128: xxhash.xxh3_128_digest on every length class", "[hasher]") {
  const auto& v = vectors().at("xxh3_128");
  REQUIRE(v.size() >= 30);
  for (const auto& x : v) {
    const auto n = x.at("len").get<std::size_t>();
    std::vector<std::uint8_t> data(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<std::uint8_t>((i * 31 + 7) & 0xff);
    INFO("length " << n);
    CHECK(hex(kvtk::detail::xxh3_128(data).canonical()) == x.at("digest").get<std::string>());
  }
}

TEST_CASE("pickler: CPython's protocol-5 bytes, framing and memo included", "[hasher]") {
  // Expected: hashlib.sha256(pickle.dumps(obj, protocol=5)) under CPython 3.11 for the objects
  // named in each section.
  using kvtk::detail::pickler;
  auto digest = [](pickler&& p) {
    const auto b = std::move(p).finish();
    return std::to_string(b.size()) + " " + hex(kvtk::detail::sha256::of(b));
  };
  SECTION("every int opcode") {
    // (None, 0, 255, 256, 65535, 65536, -1, 2**31-1, -2**31, 2**31, -2**31-1, 2**63-1, -2**63,
    //  -129, 2**39)
    const std::vector<std::int64_t> ints = {
        0,         255,       256,       65535,     65536,
        -1,        INT32_MAX, INT32_MIN, 1ll << 31, -(1ll << 31) - 1,
        INT64_MAX, INT64_MIN, -129,      1ll << 39};
    pickler p;
    p.tuple_begin(ints.size() + 1);
    p.none();
    for (auto v : ints) p.integer(v);
    p.tuple_end(ints.size() + 1);
    CHECK(digest(std::move(p)) ==
          "93 ac8ec891d6fe72f476cced11efca698a70e434ad2d6d8e5928649aa028710e26");
  }
  SECTION("payloads >= 64 KiB bypass framing") {
    // (b'x'*70000, 'y'*65536, (), (b'',), ('ab', b'cd'))
    const std::vector<std::uint8_t> x(70000, 'x'), cd = {'c', 'd'};
    pickler p;
    p.tuple_begin(5);
    p.bytes(x);
    p.str(std::string(65536, 'y'));
    p.tuple_begin(0);
    p.tuple_end(0);
    p.tuple_begin(1);
    p.bytes({});
    p.tuple_end(1);
    p.tuple_begin(2);
    p.str("ab");
    p.bytes(cd);
    p.tuple_end(2);
    p.tuple_end(5);
    CHECK(digest(std::move(p)) ==
          "135581 b05fdf12de7aea14482fcf44d5f9f4c7cdda5524e6d1d95d58bea06c15b45cc8");
  }
  SECTION("frames of 64 KiB") {
    // tuple(range(30000)) * 2
    pickler p;
    p.tuple_begin(60000);
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < 30000; ++i) p.integer(i);
    p.tuple_end(60000);
    CHECK(digest(std::move(p)) ==
          "179521 f8d84404dbdadc02db5e959d5130cc11c9f5f307afab2ad915f8d0d49281447e");
  }
  SECTION("a shared tag is a memo reference") {
    // ((m, 'id-a', 1), (m, 'id-b', -2), ('lora', 'n', 'p'), (m, 'id-c', 3)) with m = 'mm'
    // (single-use strings, so CPython's identity of equal strings does not matter)
    pickler p;
    p.tuple_begin(4);
    auto mm = [&](const char* id, std::int64_t off) {
      p.tuple_begin(3);
      p.str("mm", true);
      p.str(id);
      p.integer(off);
      p.tuple_end(3);
    };
    mm("id-a", 1);
    mm("id-b", -2);
    p.tuple_begin(3);
    p.str("lora", true);
    p.str("n");
    p.str("p");
    p.tuple_end(3);
    mm("id-c", 3);
    p.tuple_end(4);
    CHECK(digest(std::move(p)) ==
          "77 d7b233ab9bb5e3c8f5687dffec99df7d0e07f5c845728f7a3512f12a4afcb0c8");
  }
}

TEST_CASE("pickler: the allocation-free plain-block pickle equals the general writer", "[hasher]") {
  // vllm_hash_block's fast path (no extra keys, no lookahead) against block_payload<pickler>, on
  // every integer size class, both parent sizes (sha256, xxhash) and the tuple sizes 0..4, 2048.
  std::mt19937_64 rng(37);
  const std::int64_t edges[] = {0, 1, 255, 256, 65535, 65536, INT32_MAX, std::int64_t{INT32_MAX} + 1,
                                INT32_MIN, -1, -129, std::int64_t{1} << 40, INT64_MAX, INT64_MIN};
  std::array<std::uint8_t, kvtk::prefix::detail_hasher::plain_pickle_buffer> buf{};
  for (const std::uint8_t parent_size : {std::uint8_t{32}, std::uint8_t{16}}) {
    for (const std::size_t n : {0, 1, 2, 3, 4, 16, 17, 2048}) {
      for (int round = 0; round < 20; ++round) {
        kvtk::prefix::block_digest parent;
        parent.size = parent_size;
        for (auto& b : parent.data) b = static_cast<std::uint8_t>(rng());
        std::vector<std::int64_t> tokens(n);
        for (auto& t : tokens) {
          t = rng() % 3 == 0 ? edges[rng() % std::size(edges)] : static_cast<std::int64_t>(rng() % 200000);
        }
        const auto want = kvtk::prefix::detail_hasher::block_payload<kvtk::detail::pickler>(parent, tokens, {}, {});
        const std::size_t got = kvtk::prefix::detail_hasher::plain_block_pickle(parent, tokens, buf.data());
        REQUIRE(got == want.size());
        CHECK(std::equal(want.begin(), want.end(), buf.begin()));
      }
    }
  }
}

TEST_CASE("cbor_writer: RFC 8949 appendix A encodings", "[hasher]") {
  using kvtk::detail::cbor_writer;
  auto one_int = [](std::int64_t v) {
    cbor_writer w;
    w.integer(v);
    return hex(std::move(w).finish());
  };
  CHECK(one_int(0) == "00");
  CHECK(one_int(23) == "17");
  CHECK(one_int(24) == "1818");
  CHECK(one_int(100) == "1864");
  CHECK(one_int(1000) == "1903e8");
  CHECK(one_int(1000000) == "1a000f4240");
  CHECK(one_int(1000000000000) == "1b000000e8d4a51000");
  CHECK(one_int(-1) == "20");
  CHECK(one_int(-100) == "3863");
  CHECK(one_int(-1000) == "3903e7");
  CHECK(one_int(INT64_MIN) == "3b7fffffffffffffff");
  cbor_writer w;
  w.tuple_begin(4);
  w.none();
  const std::vector<std::uint8_t> b = {1, 2, 3, 4};
  w.bytes(b);
  w.str("IETF", true);  // no object identity in CBOR: a tag is an ordinary string
  w.tuple_begin(2);
  w.integer(2);
  w.integer(3);
  w.tuple_end(2);
  w.tuple_end(4);
  CHECK(hex(std::move(w).finish()) == "84f644010203046449455446820203");
}

TEST_CASE("block_hasher: dispatches to the engine hasher it holds", "[hasher]") {
  const auto tokens = sequence("chat_a");
  request_extras x;
  x.cache_salt = "s";
  x.extra_key = "k";
  const vllm_hash_options vo{.algo = vllm_hash_algo::xxhash,
                             .block_size = 4,
                             .none_hash_seed = "7",
                             .lookahead_tokens = 2};
  const vllm_hasher ve(vo);
  const block_hasher v(vo);
  CHECK(v.is_vllm());
  CHECK(v.block_tokens() == 4);
  CHECK(v.lookahead_tokens() == 2);
  CHECK(v.partial() == partial_block::skip);
  CHECK(v.none_hash() == ve.none_hash());
  CHECK(v.none_hash() == vllm_none_hash(vllm_hash_algo::xxhash, "7"));
  CHECK(v.digests(tokens, x) == ve.digests(tokens, x));
  CHECK(v.key_of(ve.digests(tokens)[0]) == vllm_block_key(ve.digests(tokens)[0]));

  const sglang_hash_options so{.page_size = 5, .partial = partial_block::cache};
  const sglang_hasher se(so);
  const block_hasher s(so);
  CHECK_FALSE(s.is_vllm());
  CHECK(s.block_tokens() == 5);
  CHECK(s.lookahead_tokens() == 0);
  CHECK(s.partial() == partial_block::cache);
  CHECK(s.none_hash().size == 0);
  CHECK(s.digests(tokens, x) == se.digests(tokens, x));
  const auto d = se.digests(tokens, x);
  REQUIRE(d.size() == 8);  // 37 tokens: 7 full pages and a partial one
  std::vector<kvtk::block_key> want;
  for (const auto& h : d) want.push_back(sglang_block_key(h));
  CHECK(s.keys(tokens, x) == want);

  CHECK_THROWS_AS(vllm_hasher(vllm_hash_options{.block_size = 0}), std::invalid_argument);
  CHECK_THROWS_AS(sglang_hasher(sglang_hash_options{.page_size = 0}), std::invalid_argument);
}

TEST_CASE("vLLM: block hashes equal vLLM's request block hasher", "[hasher]") {
  const auto& vs = vectors().at("vllm");
  REQUIRE(vs.size() >= 80);
  std::size_t blocks = 0;
  for (const auto& v : vs) {
    INFO(v.at("name").get<std::string>());
    vllm_hash_options o;
    o.algo = parse_vllm_hash_algo(v.at("algo").get<std::string>());
    o.block_size = v.at("block_size").get<std::uint32_t>();
    o.none_hash_seed = v.at("none_hash_seed").get<std::string>();
    o.lookahead_tokens = v.at("lookahead").get<std::uint32_t>();
    const auto tokens = v.at("token_ids_used").is_null()
                            ? sequence(v.at("tokens").get<std::string>())
                            : expand(v.at("token_ids_used"));
    request_extras x;
    const auto& e = v.at("extras");
    if (e.contains("lora")) {
      x.lora = vllm_lora_key{e["lora"].at("name").get<std::string>(),
                             e["lora"].at("path").get<std::string>()};
    }
    if (e.contains("cache_salt")) x.cache_salt = repeat(e["cache_salt"]);
    if (e.contains("mm")) {
      for (const auto& m : e["mm"]) {
        x.mm.push_back({m.at("identifier").get<std::string>(), m.at("offset").get<std::uint64_t>(),
                        m.at("length").get<std::uint64_t>()});
      }
    }
    if (e.contains("prompt_embeds")) {
      for (const auto& d : e["prompt_embeds"]) x.prompt_embeds.push_back(digest32(d));
    }

    const block_digest none = vllm_none_hash(o.algo, o.none_hash_seed);
    CHECK(none.hex() == v.at("none_hash").get<std::string>());

    std::vector<std::string> want;
    for (const auto& h : v.at("block_hashes")) want.push_back(h.get<std::string>());
    const auto got = vllm_block_hashes(tokens, o, x);
    CHECK(hexes(got) == want);

    std::vector<kvtk::block_key> want_keys;
    for (const auto& k : v.at("int_block_hashes")) want_keys.push_back(k.get<std::uint64_t>());
    const block_hasher h(o);
    CHECK(h.none_hash() == none);
    CHECK(h.keys(tokens, x) == want_keys);
    blocks += got.size();
  }
  CHECK(blocks > 1000);
}

TEST_CASE("vLLM: hash_block_tokens building blocks", "[hasher]") {
  // The chain is hash_block_tokens applied block by block from NONE_HASH.
  const auto tokens = sequence("chat_a");
  for (auto a : {vllm_hash_algo::sha256, vllm_hash_algo::sha256_cbor, vllm_hash_algo::xxhash,
                 vllm_hash_algo::xxhash_cbor}) {
    vllm_hash_options o;
    o.algo = a;
    o.block_size = 4;
    o.none_hash_seed = "12345";
    const auto chain = vllm_block_hashes(tokens, o);
    REQUIRE(chain.size() == 9);
    block_digest parent = vllm_none_hash(a, "12345");
    CHECK(parent.size ==
          (a == vllm_hash_algo::sha256 || a == vllm_hash_algo::sha256_cbor ? 32 : 16));
    for (std::size_t b = 0; b < chain.size(); ++b) {
      parent = vllm_hash_block(a, parent, std::span(tokens).subspan(4 * b, 4));
      CHECK(parent == chain[b]);
    }
    CHECK(parse_vllm_hash_algo(to_string(a)) == a);
  }
  CHECK_THROWS_AS(parse_vllm_hash_algo("md5"), std::invalid_argument);
  // A partial block has no hash; fewer tokens than a block give none.
  vllm_hash_options o;
  o.block_size = 16;
  CHECK(vllm_block_hashes(std::vector<int>(15, 1), o).empty());
  CHECK(vllm_block_hashes(std::vector<int>(33, 1), o).size() == 2);
  o.block_size = 0;
  CHECK_THROWS_AS(vllm_block_hashes(std::vector<int>(4, 1), o), std::invalid_argument);
  CHECK_THROWS_AS(block_hasher(o), std::invalid_argument);
  // Any integral token type gives the same hashes.
  o.block_size = 4;
  const std::vector<std::uint32_t> u32(tokens.begin(), tokens.end());
  const std::vector<int> i32(tokens.begin(), tokens.end());
  CHECK(vllm_block_hashes(u32, o) == vllm_block_hashes(tokens, o));
  CHECK(vllm_block_hashes(i32, o) == vllm_block_hashes(tokens, o));
  CHECK_THROWS_AS(vllm_block_hashes(std::vector<std::uint64_t>(4, ~0ull), o),
                  std::invalid_argument);
  // prompt_embeds needs one digest per block.
  request_extras x;
  x.prompt_embeds.resize(2);
  CHECK_THROWS_AS(vllm_block_hashes(tokens, o, x), std::invalid_argument);
}

TEST_CASE("SGLang: page hashes equal SGLang's hash functions", "[hasher]") {
  const auto& vs = vectors().at("sglang");
  REQUIRE(vs.size() >= 20);
  for (const auto& v : vs) {
    INFO(v.at("name").get<std::string>());
    sglang_hash_options o;
    o.page_size = v.at("page_size").get<std::uint32_t>();
    o.bigram = v.at("bigram").get<bool>();
    o.partial = v.at("partial").get<bool>() ? partial_block::cache : partial_block::skip;
    o.chain =
        v.at("chain").get<std::string>() == "event" ? sglang_chain::event : sglang_chain::storage;
    request_extras x;
    if (!v.at("extra_key").is_null()) x.extra_key = v["extra_key"].get<std::string>();
    if (!v.at("cache_salt").is_null()) x.cache_salt = v["cache_salt"].get<std::string>();
    const auto tokens = sequence(v.at("tokens").get<std::string>());
    std::optional<block_digest> prior;
    if (!v.at("prior").is_null()) prior = block_digest::from_hex(v["prior"].get<std::string>());

    std::vector<std::string> want;
    for (const auto& h : v.at("page_hashes")) want.push_back(h.get<std::string>());
    const auto got = sglang_page_hashes(tokens, o, x, prior ? &*prior : nullptr);
    CHECK(hexes(got) == want);

    std::vector<std::int64_t> want_keys, got_keys;
    for (const auto& k : v.at("int64_keys")) want_keys.push_back(k.get<std::int64_t>());
    for (const auto& d : got) got_keys.push_back(static_cast<std::int64_t>(sglang_block_key(d)));
    CHECK(got_keys == want_keys);
    if (!prior) CHECK(block_hasher(o).digests(tokens, x) == got);

    // Full pages only: the leading hashes of the partial-page run.
    if (o.partial == partial_block::cache) {
      o.partial = partial_block::skip;
      const auto full = sglang_page_hashes(tokens, o, x, prior ? &*prior : nullptr);
      const std::size_t units = o.bigram ? tokens.size() - 1 : tokens.size();
      CHECK(full.size() == units / o.page_size);
      CHECK(std::equal(full.begin(), full.end(), got.begin()));
    }
  }
}

TEST_CASE("SGLang: bad input", "[hasher]") {
  sglang_hash_options o;
  o.page_size = 2;
  CHECK_THROWS_AS(sglang_page_hashes(std::vector<int>{1, -2}, o), std::invalid_argument);
  o.page_size = 0;
  CHECK_THROWS_AS(sglang_page_hashes(std::vector<int>{1, 2}, o), std::invalid_argument);
  CHECK_THROWS_AS(block_hasher(o), std::invalid_argument);
  o.page_size = 1;
  o.bigram = true;
  CHECK(sglang_page_hashes(std::vector<int>{}, o).empty());
  CHECK(sglang_page_hashes(std::vector<int>{7}, o).empty());
  CHECK(sglang_page_hashes(std::vector<int>{7, 8}, o).size() == 1);
  CHECK_THROWS_AS(block_digest::from_hex("abc"), std::invalid_argument);
  CHECK_THROWS_AS(block_digest::from_hex("zz"), std::invalid_argument);
  CHECK(block_digest::from_hex("00FFab").hex() == "00ffab");
}

TEST_CASE("prefix_trace_builder: shared prefixes share keys", "[hasher]") {
  const auto a = sequence("chat_a");  // 37 tokens
  const auto b = sequence("chat_b");  // 35 tokens, the first 24 equal to a's

  SECTION("vLLM") {
    prefix_trace_builder tb(block_hasher(vllm_hash_options{.block_size = 4}));
    const auto ka_span = tb.add(a);
    const std::vector<kvtk::block_key> ka(ka_span.begin(), ka_span.end());
    const auto kb_span = tb.add(b);
    const std::vector<kvtk::block_key> kb(kb_span.begin(), kb_span.end());
    tb.add(a);
    REQUIRE(ka.size() == 9);  // full blocks only
    REQUIRE(kb.size() == 8);
    CHECK(std::equal(ka.begin(), ka.begin() + 6, kb.begin()));
    for (std::size_t i = 6; i < kb.size(); ++i) CHECK(ka[i] != kb[i]);
    CHECK(tb.partial() == partial_block::skip);

    const prefix_trace t = tb.take();
    CHECK(tb.trace().keys.empty());
    CHECK(t.block_tokens == 4);
    CHECK(t.requests() == 3);
    CHECK(t.input_tokens(0) == 37);
    CHECK(t.input_tokens(1) == 35);
    const prefix_mrc m = exact_prefix_lru_mrc(t);
    CHECK(m.block_refs == 9 + 8 + 9);
    CHECK(m.block_hits(1000) == 6 + 9);
    CHECK(m.block_hits(0) == 0);

    // A cache_salt isolates the request: no key in common.
    request_extras salted;
    salted.cache_salt = "tenant";
    prefix_trace_builder ts(block_hasher(vllm_hash_options{.block_size = 4}));
    const auto ks = ts.add(a, salted);
    for (std::size_t i = 0; i < ks.size(); ++i) CHECK(ks[i] != ka[i]);
  }

  SECTION("SGLang") {
    const block_hasher h(sglang_hash_options{.page_size = 4});
    const prefix_trace t = make_prefix_trace(std::vector{a, b, a}, h);
    REQUIRE(t.requests() == 3);
    const auto ka = t.blocks(0), kb = t.blocks(1);
    REQUIRE(ka.size() == 9);
    REQUIRE(kb.size() == 8);
    CHECK(std::equal(ka.begin(), ka.begin() + 6, kb.begin()));
    CHECK(ka[6] != kb[6]);
    CHECK(exact_prefix_lru_mrc(t).block_hits(1000) == 6 + 9);
    // The keys are SGLang's page hashes, first 8 bytes big-endian.
    const auto d = sglang_page_hashes(a, sglang_hash_options{.page_size = 4});
    CHECK(ka[0] == sglang_block_key(d[0]));
  }
}
