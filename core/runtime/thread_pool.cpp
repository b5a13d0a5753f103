#include "core/runtime/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sl {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
    _mm_pause();
#endif
}

// Waiting for the next loop: pause-spin this many times, then yield the core (so an oversubscribed
// machine still makes progress), then sleep.
constexpr int kPauseSpins = 2000;
constexpr int kSpins = 20000;

inline void backoff(int spins) {
    if (spins < kPauseSpins) cpu_relax();
    else std::this_thread::yield();
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    try {
        for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
    } catch (...) {  // no thread to be had (std::system_error): those started stop first
        stop_workers();
        throw;
    }
}

ThreadPool::~ThreadPool() {
    stop_workers();
}

void ThreadPool::stop_workers() {
    {
        std::lock_guard lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
}

void ThreadPool::run_chunk(int index) {
    const int64_t chunks = n_threads_;
    int64_t per = (n_ + chunks - 1) / chunks;
    per = (per + grain_ - 1) / grain_ * grain_;
    const int64_t begin = std::min<int64_t>(n_, per * index);
    const int64_t end = std::min<int64_t>(n_, begin + per);
    if (begin < end) (*job_)(begin, end, index);
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        uint64_t g;
        while ((g = generation_.load(std::memory_order_acquire)) == seen) {
            if (++spins < kSpins) {
                backoff(spins);
                continue;
            }
            std::unique_lock lock(mutex_);
            sleepers_.fetch_add(1);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
            sleepers_.fetch_sub(1);
        }
        seen = g;
        if (stop_.load()) return;
        run_chunk(index);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n, 0);
        return;
    }
    job_ = &fn;
    n_ = n;
    grain_ = std::max<int64_t>(1, grain);
    pending_.store(n_threads_ - 1, std::memory_order_release);
    {
        // Publishing under the mutex pairs with the sleepers' predicate check.
        std::lock_guard lock(mutex_);
        generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    if (sleepers_.load() > 0) wake_.notify_all();
    run_chunk(0);
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) backoff(spins);
    job_ = nullptr;
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
    parallel_for(n_threads_, [&fn](int64_t, int64_t, int t) { fn(t); });
}

}  // namespace sl
