// Links libkvtk_policies (kvtk's compiled library, which holds the C ABI of kvtk/c/kvtk.h).
//   KVTK_LIB_DIR  the directory holding libkvtk_policies.a (or .so / .dylib)
//   KVTK_LINK     "static" (default) or "dylib"
use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=KVTK_LIB_DIR");
    println!("cargo:rerun-if-env-changed=KVTK_LINK");
    if let Ok(dir) = env::var("KVTK_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
    }
    if env::var("KVTK_LINK").as_deref() == Ok("dylib") {
        println!("cargo:rustc-link-lib=dylib=kvtk_policies");
    } else {
        println!("cargo:rustc-link-lib=static=kvtk_policies");
        // The static library is C++ inside: link the C++ runtime too (a shared library carries
        // that dependency itself).
        let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        let runtime = if os == "macos" || os == "freebsd" {
            "c++"
        } else {
            "stdc++"
        };
        println!("cargo:rustc-link-lib=dylib={runtime}");
    }
}
