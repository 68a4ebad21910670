//! Heap accounting for the manager: a global allocator wrapper that counts the bytes the
//! program holds (live) and the most it ever held (peak). RSS alone cannot tell live data from
//! what the allocator keeps cached or fragmented; with these two figures (exported on /metrics
//! as `kruise_manager_heap_live_bytes` and `kruise_manager_heap_peak_bytes`) the scale
//! benchmark tells them apart. Cost: two relaxed atomic adds per allocation.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Wraps the allocator `A` and counts what passes through it. Install it in the binary with
/// `#[global_allocator] static A: Counting<System> = Counting(System);`.
pub struct Counting<A>(pub A);

fn grow(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    // A racy maximum is fine: the peak is a figure for a benchmark, not an invariant.
    if now > PEAK.load(Ordering::Relaxed) {
        PEAK.store(now, Ordering::Relaxed);
    }
}

fn shrink(by: usize) {
    LIVE.fetch_sub(by, Ordering::Relaxed);
}

// SAFETY: every method forwards to the wrapped allocator with the caller's layout unchanged;
// the counters never affect the memory handed out.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`, as the caller guarantees.
        unsafe { self.0.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `realloc`'s contract.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrink(layout.size());
            grow(new_size);
        }
        p
    }
}

/// Bytes allocated and not yet freed (0 when [`Counting`] is not the global allocator).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most [`live_bytes`] has been since the start.
pub fn peak_bytes() -> usize {
    PEAK.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    #[test]
    fn counts_allocations_and_frees() {
        // The test binary's global allocator is the system one and nothing else in it uses the
        // counters, so driving the wrapper directly makes them exact.
        let a = Counting(System);
        let layout = Layout::from_size_align(4096, 8).expect("layout");
        let before = live_bytes();
        // SAFETY: a valid non-zero layout; freed below with the same layout.
        let p = unsafe { a.alloc(layout) };
        assert!(!p.is_null());
        assert_eq!(live_bytes(), before + 4096);
        assert!(peak_bytes() >= 4096);
        // SAFETY: `p` came from `a.alloc(layout)`; grown then freed with its current layout.
        let q = unsafe { a.realloc(p, layout, 8192) };
        assert!(!q.is_null());
        let bigger = Layout::from_size_align(8192, 8).expect("layout");
        assert_eq!(live_bytes(), before + 8192);
        assert!(peak_bytes() >= before + 8192);
        // SAFETY: `q` is live with layout `bigger`.
        unsafe { a.dealloc(q, bigger) };
        assert_eq!(live_bytes(), before);
    }
}
