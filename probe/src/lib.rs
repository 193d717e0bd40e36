//! The probe module: a small wasm the loader (`extension/sw.js`) compiles before the provider's
//! module, so a probe that wakes the worker is answered while the provider's module is still
//! compiling. It holds the core's decision (`probe::answer_early`) and nothing else: no imports,
//! no JS glue. The loader writes the input's UTF-8 text into `input(len)`, calls `answer(len)`
//! and reads that many bytes at `output()`.
//!
//! A panic aborts (the workspace's release profile), which traps: the loader then holds the probe
//! for the provider, as it does for `{"defer": …}`.

use std::cell::RefCell;

thread_local! {
    static INPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static OUTPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Room for `len` bytes of input; the loader writes them at the address returned, before it
/// calls anything else.
#[no_mangle]
pub extern "C" fn input(len: usize) -> *mut u8 {
    INPUT.with(|b| {
        let mut b = b.borrow_mut();
        b.clear();
        b.resize(len, 0);
        b.as_mut_ptr()
    })
}

/// Answers the input's first `len` bytes; returns the length of the answer at `output()`.
#[no_mangle]
pub extern "C" fn answer(len: usize) -> usize {
    let out = INPUT.with(|b| {
        let b = b.borrow();
        match b.get(..len).map(std::str::from_utf8) {
            Some(Ok(text)) => lumo_userscripts::probe::answer_early_json(text),
            _ => r#"{"defer":"the loader's input is not UTF-8"}"#.to_owned(),
        }
    });
    OUTPUT.with(|o| {
        let mut o = o.borrow_mut();
        *o = out.into_bytes();
        o.len()
    })
}

/// Where the last answer is.
#[no_mangle]
pub extern "C" fn output() -> *const u8 {
    OUTPUT.with(|o| o.borrow().as_ptr())
}

/// A free-list allocator of a few hundred bytes instead of the default dlmalloc (~7 KB of code a
/// cold probe's first call would compile on its way): the module lives for a few probes and
/// allocates little (ARCHITECTURE.md, Decisions: the probe module's first call).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
// SAFETY: the probe module runs on the worker's one thread; nothing here is shared with another.
static ALLOCATOR: lol_alloc::AssumeSingleThreaded<lol_alloc::FreeListAllocator> =
    unsafe { lol_alloc::AssumeSingleThreaded::new(lol_alloc::FreeListAllocator::new()) };
