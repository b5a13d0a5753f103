// A fixed pool of worker threads for data-parallel loops in the forward pass.
//
// Threading contract: one thread (the owner) calls parallel_for at a time; the owner takes part in
// the work, so a pool of n threads starts n - 1 workers. Workers spin briefly between loops (decode
// issues hundreds of small loops per token, and waking sleeping threads costs more than the work),
// then sleep. The pool must outlive every loop it runs; destruction joins the workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sl {

class ThreadPool {
public:
    // n_threads <= 0 picks std::thread::hardware_concurrency(). Throws std::system_error when a
    // thread cannot be started (the ones started are stopped first).
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(begin, end, thread_index) on disjoint ranges covering [0, n), split into about
    // size() equal chunks aligned to `grain`; returns when every call has returned. fn must not
    // call parallel_for. Exceptions thrown by fn are not supported (the engine's kernels don't throw).
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain = 1);

    // Calls fn(thread_index) once on every thread of the pool.
    void run_on_all(const std::function<void(int)>& fn);

private:
    void stop_workers();  // joins every worker
    void worker(int index);
    void run_chunk(int index);

    int n_threads_ = 1;
    std::vector<std::thread> workers_;
    const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
    int64_t n_ = 0;
    int64_t grain_ = 1;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<int> sleepers_{0};
};

}  // namespace sl
