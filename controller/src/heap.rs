//! Heap accounting for the manager: a global allocator wrapper that counts the bytes the
//! program holds (live) and the most it ever held (peak). RSS alone cannot tell live data from
//! what the allocator keeps cached or fragmented; with these two figures (exported on /metrics
//! as `kruise_manager_heap_live_bytes` and `kruise_manager_heap_peak_bytes`) the scale
//! benchmark tells them apart. Cost: a thread-local add per allocation, and a shared atomic
//! add per [`FLUSH`] bytes a thread allocated or freed.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The peak since [`trim_periodically`] last looked (it resets this to the live bytes).
static WINDOW_PEAK: AtomicUsize = AtomicUsize::new(0);

/// Wraps the allocator `A` and counts what passes through it. Install it in the binary with
/// `#[global_allocator] static A: Counting<System> = Counting(System);`.
pub struct Counting<A>(pub A);

/// Bytes a thread may hold back from the shared counters: with an atomic add on every
/// allocation, their cache line moved between the runtime's threads on each `malloc` (about 2 %
/// of the manager's CPU in a 2,000-Pod rollout). The figures are off by at most this much per
/// thread, which a benchmark counting MiB does not see.
const FLUSH: isize = 64 << 10;

thread_local! {
    /// This thread's allocations (+) and frees (-) not yet in [`LIVE`]; const and without a
    /// destructor, so reading it never allocates and works while the thread exits.
    static PENDING: Cell<isize> = const { Cell::new(0) };
}

/// Records `delta` bytes allocated (+) or freed (-) by this thread.
fn account(delta: isize) {
    let due = PENDING.with(|p| {
        let v = p.get() + delta;
        if v.abs() < FLUSH {
            p.set(v);
            0
        } else {
            p.set(0);
            v
        }
    });
    match due {
        0 => {}
        d if d > 0 => grow(d.unsigned_abs()),
        d => shrink(d.unsigned_abs()),
    }
}

/// Adds this thread's pending bytes to the shared counters (tests read them exactly).
#[cfg(test)]
fn flush() {
    let v = PENDING.with(|p| p.replace(0));
    if v > 0 {
        grow(v.unsigned_abs());
    } else if v < 0 {
        shrink(v.unsigned_abs());
    }
}

fn grow(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    // A racy maximum is fine: the peak is a figure for a benchmark, not an invariant.
    if now > PEAK.load(Ordering::Relaxed) {
        PEAK.store(now, Ordering::Relaxed);
    }
    if now > WINDOW_PEAK.load(Ordering::Relaxed) {
        WINDOW_PEAK.store(now, Ordering::Relaxed);
    }
}

fn shrink(by: usize) {
    LIVE.fetch_sub(by, Ordering::Relaxed);
}

/// A size as a signed byte count (a `Layout` size is at most `isize::MAX`).
fn signed(size: usize) -> isize {
    isize::try_from(size).unwrap_or(isize::MAX)
}

// SAFETY: every method forwards to the wrapped allocator with the caller's layout unchanged;
// the counters never affect the memory handed out.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            account(signed(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            account(signed(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`, as the caller guarantees.
        unsafe { self.0.dealloc(ptr, layout) };
        account(-signed(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `realloc`'s contract.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            account(signed(new_size) - signed(layout.size()));
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

/// Hands the memory glibc's malloc holds free back to the kernel, every `every` until
/// `cancel`: without it the RSS stays at the heap's peak (watch and list bodies decoded during a
/// rollout) long after the live set has shrunk back, because glibc returns pages only from the
/// top of the main arena on its own. `malloc_trim(0)` also releases the free pages inside every
/// arena (madvise), at the cost of faulting them in again if the heap grows back; so it runs
/// only when the live heap is `min_drop` bytes or more below its peak since the last tick, not
/// on every tick. A no-op on targets without glibc.
pub async fn trim_periodically(
    every: std::time::Duration,
    min_drop: usize,
    cancel: tokio_util::sync::CancellationToken,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if should_trim(min_drop) {
            let started = std::time::Instant::now();
            trim();
            tracing::debug!(
                live_mib = live_bytes() >> 20,
                took_us = started.elapsed().as_micros() as u64,
                "returned free heap pages to the kernel"
            );
        }
    }
}

/// Whether the heap peaked `min_drop` bytes or more above what is live now since the last
/// call; starts the next window at the live bytes.
fn should_trim(min_drop: usize) -> bool {
    let live = live_bytes();
    let peak = WINDOW_PEAK.swap(live, Ordering::Relaxed);
    peak.saturating_sub(live) >= min_drop
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks glibc's own free lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

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
        flush();
        let before = live_bytes();
        // SAFETY: a valid non-zero layout; freed below with the same layout.
        let p = unsafe { a.alloc(layout) };
        assert!(!p.is_null());
        flush();
        assert_eq!(live_bytes(), before + 4096);
        assert!(peak_bytes() >= 4096);
        // SAFETY: `p` came from `a.alloc(layout)`; grown then freed with its current layout.
        let q = unsafe { a.realloc(p, layout, 8192) };
        assert!(!q.is_null());
        let bigger = Layout::from_size_align(8192, 8).expect("layout");
        flush();
        assert_eq!(live_bytes(), before + 8192);
        assert!(peak_bytes() >= before + 8192);
        // SAFETY: `q` is live with layout `bigger`.
        unsafe { a.dealloc(q, bigger) };
        flush();
        assert_eq!(live_bytes(), before);
    }

    #[test]
    fn small_amounts_are_held_per_thread_until_they_add_up() {
        let a = Counting(System);
        let small = Layout::from_size_align(1024, 8).expect("layout");
        let pending = || PENDING.with(Cell::get);
        flush();
        // SAFETY: a valid layout, freed right after with the same layout.
        let p = unsafe { a.alloc(small) };
        assert!(!p.is_null());
        assert_eq!(pending(), 1024);
        // SAFETY: `p` came from `a.alloc(small)`.
        unsafe { a.dealloc(p, small) };
        assert_eq!(pending(), 0);
        // 64 KiB in all: handed to the shared counters, nothing held back.
        // SAFETY: valid layouts, each freed below with the same layout.
        let ps: Vec<*mut u8> = (0..64).map(|_| unsafe { a.alloc(small) }).collect();
        assert!(ps.iter().all(|p| !p.is_null()));
        assert_eq!(pending(), 0);
        for p in ps {
            // SAFETY: `p` came from `a.alloc(small)`.
            unsafe { a.dealloc(p, small) };
        }
        assert_eq!(pending(), 0);
    }

    #[test]
    fn trims_only_after_the_heap_fell_from_a_peak() {
        let a = Counting(System);
        let big = Layout::from_size_align(1 << 20, 8).expect("layout");
        // Starts a window at the live bytes.
        should_trim(usize::MAX);
        // (The other counting test runs beside this one, moving the counters by a few KiB.)
        assert!(!should_trim(1 << 19), "nothing allocated: no trim");
        // SAFETY: a valid layout, freed right after with the same layout.
        let p = unsafe { a.alloc(big) };
        assert!(!p.is_null());
        // SAFETY: `p` came from `a.alloc(big)`.
        unsafe { a.dealloc(p, big) };
        assert!(should_trim(1 << 19), "1 MiB came and went: trim");
        assert!(!should_trim(1 << 19), "a new window: nothing since");
        trim();
    }
}
