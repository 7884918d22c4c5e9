// kvtk's C ABI (include/kvtk/c/kvtk.h) from Rust: the raw `extern "C"` declarations (`sys`), a
// safe wrapper that owns the handle (`BlockCache`, freed by Drop), and a short run that checks
// LRU's exact evictions, pins, errors and the batched access. See docs/c_api.md.

mod sys {
    //! The declarations of kvtk/c/kvtk.h that this example uses, one for one.
    use std::ffi::{c_char, c_void};

    /// The opaque `kvtk_cache`: only ever behind a pointer.
    #[repr(C)]
    pub struct KvtkCache {
        _private: [u8; 0],
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct KvtkStats {
        pub hits: u64,
        pub misses: u64,
        pub insertions: u64,
        pub evictions: u64,
        pub rejections: u64,
    }

    pub type KvtkStatus = i32;
    pub const KVTK_OK: KvtkStatus = 0;
    pub const KVTK_HIT: u8 = 0;
    pub const KVTK_INSERTED: u8 = 1;
    pub const KVTK_REJECTED: u8 = 2;

    /// `kvtk_evict_fn`; None is NULL (a nullable function pointer has the same ABI).
    pub type KvtkEvictFn = Option<unsafe extern "C" fn(user: *mut c_void, key: u64, slot: u32)>;

    extern "C" {
        pub fn kvtk_version() -> *const c_char;
        pub fn kvtk_status_string(status: KvtkStatus) -> *const c_char;
        pub fn kvtk_last_error() -> *const c_char;
        pub fn kvtk_policy_count() -> usize;
        pub fn kvtk_policy_name(i: usize) -> *const c_char;
        pub fn kvtk_cache_create(
            policy: *const c_char,
            capacity: u64,
            max_entries: u32,
            on_evict: KvtkEvictFn,
            user: *mut c_void,
            out: *mut *mut KvtkCache,
        ) -> KvtkStatus;
        pub fn kvtk_cache_destroy(cache: *mut KvtkCache);
        pub fn kvtk_cache_access(
            cache: *mut KvtkCache,
            key: u64,
            size: u32,
            out_result: *mut u8,
            out_slot: *mut u32,
        ) -> KvtkStatus;
        pub fn kvtk_cache_access_batch(
            cache: *mut KvtkCache,
            keys: *const u64,
            n: usize,
            results: *mut u8,
        ) -> KvtkStatus;
        pub fn kvtk_cache_pin(cache: *mut KvtkCache, key: u64) -> KvtkStatus;
        pub fn kvtk_cache_unpin(cache: *mut KvtkCache, key: u64) -> KvtkStatus;
        pub fn kvtk_cache_erase(cache: *mut KvtkCache, key: u64) -> KvtkStatus;
        pub fn kvtk_cache_evict(cache: *mut KvtkCache, n: usize) -> KvtkStatus;
        pub fn kvtk_cache_size(cache: *const KvtkCache) -> usize;
        pub fn kvtk_cache_stats(cache: *const KvtkCache, out: *mut KvtkStats) -> KvtkStatus;
    }
}

mod kvtk {
    //! A safe wrapper: one owned handle, Rust errors, a closure as the eviction callback.
    use super::sys;
    use std::any::Any;
    use std::ffi::{c_char, c_void, CStr, CString};
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    use std::ptr::{self, NonNull};

    pub use sys::KvtkStats as Stats;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Error {
        pub status: i32,
        pub name: &'static str,
        pub message: String,
    }

    fn static_str(p: *const c_char) -> &'static str {
        // The library's static strings (versions, names, status names) live as long as the program.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("?")
    }

    fn check(status: sys::KvtkStatus) -> Result<(), Error> {
        if status == sys::KVTK_OK {
            return Ok(());
        }
        // Copy the thread-local message at once: the next failing call replaces it.
        let message = unsafe { CStr::from_ptr(sys::kvtk_last_error()) }
            .to_string_lossy()
            .into_owned();
        Err(Error {
            status,
            name: static_str(unsafe { sys::kvtk_status_string(status) }),
            message,
        })
    }

    pub fn version() -> &'static str {
        static_str(unsafe { sys::kvtk_version() })
    }

    /// The policy names `BlockCache::new` accepts.
    pub fn policies() -> Vec<&'static str> {
        (0..unsafe { sys::kvtk_policy_count() })
            .map(|i| static_str(unsafe { sys::kvtk_policy_name(i) }))
            .collect()
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Access {
        Hit { slot: u32 },
        Inserted { slot: u32 },
        Rejected,
    }

    /// The callback's state, behind a raw pointer (the C library holds it as `user`).
    struct Callback {
        f: Box<dyn FnMut(u64, u32) + Send>,
        panic: Option<Box<dyn Any + Send>>,
    }

    unsafe extern "C" fn trampoline(user: *mut c_void, key: u64, slot: u32) {
        let cb = unsafe { &mut *(user as *mut Callback) };
        // A panic must not unwind into the library: keep it and resume it once the call returns.
        if cb.panic.is_none() {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| (cb.f)(key, slot))) {
                cb.panic = Some(p);
            }
        }
    }

    /// A kvtk block cache. Not Sync (a handle is not thread-safe); Send, as the handle may move.
    pub struct BlockCache {
        raw: NonNull<sys::KvtkCache>,
        callback: *mut Callback, // null without a callback; freed in Drop, after the cache
    }

    // SAFETY: the handle may be used from any one thread at a time, and the callback is Send.
    unsafe impl Send for BlockCache {}

    impl BlockCache {
        pub fn new(policy: &str, capacity: u64) -> Result<Self, Error> {
            Self::create(policy, capacity, ptr::null_mut())
        }

        /// `on_evict(key, slot)` runs for each evicted key, in eviction order.
        pub fn with_evict<F: FnMut(u64, u32) + Send + 'static>(
            policy: &str,
            capacity: u64,
            on_evict: F,
        ) -> Result<Self, Error> {
            let cb = Box::into_raw(Box::new(Callback {
                f: Box::new(on_evict),
                panic: None,
            }));
            Self::create(policy, capacity, cb).inspect_err(|_| drop(unsafe { Box::from_raw(cb) }))
        }

        fn create(policy: &str, capacity: u64, callback: *mut Callback) -> Result<Self, Error> {
            let name = CString::new(policy).map_err(|_| Error {
                status: 2,
                name: "KVTK_ERR_INVALID_ARGUMENT",
                message: "the policy name contains a NUL byte".into(),
            })?;
            let (f, user): (sys::KvtkEvictFn, *mut c_void) = if callback.is_null() {
                (None, ptr::null_mut())
            } else {
                (Some(trampoline), callback.cast())
            };
            let mut raw = ptr::null_mut();
            check(unsafe {
                sys::kvtk_cache_create(name.as_ptr(), capacity, 0, f, user, &mut raw)
            })?;
            Ok(BlockCache {
                raw: NonNull::new(raw).expect("KVTK_OK with a NULL handle"),
                callback,
            })
        }

        fn resume_callback_panic(&mut self) {
            if !self.callback.is_null() {
                if let Some(p) = unsafe { (*self.callback).panic.take() } {
                    resume_unwind(p);
                }
            }
        }

        pub fn access(&mut self, key: u64) -> Result<Access, Error> {
            let (mut result, mut slot) = (0u8, 0u32);
            let status = unsafe {
                sys::kvtk_cache_access(self.raw.as_ptr(), key, 1, &mut result, &mut slot)
            };
            self.resume_callback_panic();
            check(status)?;
            Ok(match result {
                sys::KVTK_HIT => Access::Hit { slot },
                sys::KVTK_INSERTED => Access::Inserted { slot },
                sys::KVTK_REJECTED => Access::Rejected,
                other => unreachable!("kvtk_access_result {other}"),
            })
        }

        /// One call for a request's blocks, in order; true where the key was a hit.
        pub fn access_batch(&mut self, keys: &[u64]) -> Result<Vec<bool>, Error> {
            let mut results = vec![0u8; keys.len()];
            let status = unsafe {
                sys::kvtk_cache_access_batch(
                    self.raw.as_ptr(),
                    keys.as_ptr(),
                    keys.len(),
                    results.as_mut_ptr(),
                )
            };
            self.resume_callback_panic();
            check(status)?;
            Ok(results.into_iter().map(|r| r == sys::KVTK_HIT).collect())
        }

        pub fn pin(&mut self, key: u64) -> Result<(), Error> {
            check(unsafe { sys::kvtk_cache_pin(self.raw.as_ptr(), key) })
        }
        pub fn unpin(&mut self, key: u64) -> Result<(), Error> {
            check(unsafe { sys::kvtk_cache_unpin(self.raw.as_ptr(), key) })
        }
        pub fn erase(&mut self, key: u64) -> Result<(), Error> {
            check(unsafe { sys::kvtk_cache_erase(self.raw.as_ptr(), key) })
        }
        /// Evicts n unpinned entries in victim order (through the callback), or none.
        pub fn evict(&mut self, n: usize) -> Result<(), Error> {
            let status = unsafe { sys::kvtk_cache_evict(self.raw.as_ptr(), n) };
            self.resume_callback_panic();
            check(status)
        }
        pub fn len(&self) -> usize {
            unsafe { sys::kvtk_cache_size(self.raw.as_ptr()) }
        }
        pub fn stats(&self) -> Stats {
            let mut s = Stats::default();
            check(unsafe { sys::kvtk_cache_stats(self.raw.as_ptr(), &mut s) })
                .expect("valid handle");
            s
        }
    }

    impl Drop for BlockCache {
        fn drop(&mut self) {
            // Destroying calls no callback; free the callback's state afterwards.
            unsafe { sys::kvtk_cache_destroy(self.raw.as_ptr()) };
            if !self.callback.is_null() {
                drop(unsafe { Box::from_raw(self.callback) });
            }
        }
    }
}

use kvtk::{Access, BlockCache};
use std::sync::{Arc, Mutex};

fn main() -> Result<(), kvtk::Error> {
    println!(
        "kvtk {} — policies: {}",
        kvtk::version(),
        kvtk::policies().join(" ")
    );

    // LRU with 3 blocks: the callback sees the evicted keys in order.
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&evicted);
    let mut cache =
        BlockCache::with_evict("lru", 3, move |key, _slot| log.lock().unwrap().push(key))?;
    for key in [1, 2, 3, 1, 4, 5, 2] {
        let outcome = cache.access(key)?;
        println!("access {key}: {outcome:?}");
    }
    assert_eq!(*evicted.lock().unwrap(), vec![2, 3, 1]);
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.evictions), (1, 6, 3));

    // Pinned blocks are never evicted: with all three pinned, a new key is rejected.
    for key in [4, 5, 2] {
        cache.pin(key)?;
    }
    assert_eq!(cache.access(9)?, Access::Rejected);
    let err = cache.evict(1).unwrap_err();
    println!(
        "evict(1) with everything pinned: {} ({})",
        err.name, err.message
    );
    let err = cache.erase(4).unwrap_err();
    println!("erase(4) while pinned: {} ({})", err.name, err.message);
    cache.unpin(4)?;
    cache.evict(1)?;
    assert_eq!(*evicted.lock().unwrap(), vec![2, 3, 1, 4]);

    // A request's blocks in one call.
    let hits = cache.access_batch(&[5, 2, 10, 11])?;
    println!(
        "batch [5, 2, 10, 11]: hits {hits:?}, {} resident",
        cache.len()
    );
    assert_eq!(hits, vec![true, true, false, false]);
    println!("stats: {:?}", cache.stats());

    // Errors carry the status and the library's message.
    let err = BlockCache::new("lur", 8).err().expect("unknown policy");
    println!("BlockCache::new(\"lur\"): {} — {}", err.name, err.message);
    let err = BlockCache::new("belady", 8).err().expect("offline policy");
    println!(
        "BlockCache::new(\"belady\"): {} — {}",
        err.name, err.message
    );
    assert!(BlockCache::new("s3fifo", 0).is_err());

    // A handle may move to another thread (one thread at a time).
    let moved = std::thread::spawn(move || cache.access(12).map(|_| cache.len()));
    println!(
        "after a move to another thread: {} resident",
        moved.join().unwrap()?
    );
    println!("ok");
    Ok(())
}
