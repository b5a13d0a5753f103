// Progressive prefill: runs a long context (a library's documents, ~600K tokens for a 1,000-page
// PDF) through the model in chunks, saving the session after every chunk (Session::save appends only
// the new KV pages), so that
//   - the work survives a restart: a new ProgressivePrefill on the same file resumes where the last
//     save ended (a saved prefix of the same tokens, same model and cache settings);
//   - a question asked before it finishes can be answered from what is prefilled so far: the saved
//     file holds a valid prefix at every moment (see PrefillStatus::done / saved_tokens()).
//
//   ProgressivePrefill p(session, stream.tokens, library_dir / "kv/context.slkv");
//   p.on_progress = [](const PrefillStatus& s) { ... };   // prefill thread, throttled
//   p.start();            // background thread; or p.run() on the calling thread
//   ...; p.cancel();      // stops within the chunk in flight (<= 256 tokens on), saving what it prefilled
//   p.wait();
//
// A file that does not hold a prefix of `tokens` (another library state), or that Session::restore
// refuses (corrupt, other model, other settings), is not used: prefill starts over (from a seed's
// shared prefix when PrefillOptions::seeds has one) and overwrites it; status().note says why.
//
// Threading: the Session belongs to the prefill while it runs (between start() and the end of
// wait()/the destructor): nobody else may touch it. status(), cancel() and running() may be called
// from any thread. on_progress runs on the prefill thread (at most every progress_interval, and once
// at the end); it must not call back into this object except status()/cancel().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sl {

class Session;

struct PrefillOptions {
    int64_t save_every = 2048;         // tokens prefilled between saves (rounded up to whole chunks)
    double progress_interval = 0.1;    // seconds between on_progress calls (10 Hz)
    // Other saved contexts that may share a prefix with the tokens (the library's context before a
    // document was added: the same opening and documents up to the new one). When the file itself
    // holds nothing usable, the seed sharing the longest prefix (at least min_seed_tokens, made by
    // the same attention: its recorded signature equals the session's) is restored and cut to that
    // prefix (Session::truncate), and the prefill goes on from there into `path`; seeds are only read.
    std::vector<std::string> seeds = {};
    int64_t min_seed_tokens = 256;
};

struct PrefillStatus {
    int64_t total = 0;          // tokens to prefill in all
    int64_t done = 0;           // tokens in the session (prefilled or restored)
    int64_t saved = 0;          // tokens in the file as of the last save (a valid prefix)
    int64_t resumed_from = 0;   // tokens restored from the file (or a seed) at the start (0: from scratch)
    std::string seed;           // the seed the prefix came from, or empty
    double seconds = 0;         // prefill time spent by this object (not counting restore)
    double tokens_per_second = 0;
    double eta_seconds = -1;    // < 0 while unknown
    bool finished = false;      // every token prefilled and saved
    bool cancelled = false;
    std::string note;           // why a saved file was not used, or empty
    std::string error;          // what stopped the prefill (empty when none)
};

class ProgressivePrefill {
public:
    ProgressivePrefill(Session& session, std::vector<int32_t> tokens, std::string path, PrefillOptions options = {});
    ~ProgressivePrefill();  // cancels and joins a background run

    ProgressivePrefill(const ProgressivePrefill&) = delete;
    ProgressivePrefill& operator=(const ProgressivePrefill&) = delete;

    // Runs on the calling thread until finished, cancelled or failed (errors land in
    // status().error; nothing throws).
    void run();
    // Runs on a background thread. Call once.
    void start();
    // Asks the run to stop: within the chunk in flight, at the next 256-token step, after saving
    // what the chunk prefilled so far (a valid prefix). Any thread.
    void cancel() { cancel_.store(true); }
    // Joins the background thread (no-op without one).
    void wait();
    bool running() const { return running_.load(); }

    PrefillStatus status() const;

    std::function<void(const PrefillStatus&)> on_progress;

private:
    void resume();
    void report(bool force);

    Session& session_;
    std::vector<int32_t> tokens_;
    std::string path_;
    PrefillOptions options_;
    std::thread thread_;
    std::atomic<bool> cancel_{false};
    std::atomic<bool> running_{false};
    mutable std::mutex mutex_;
    PrefillStatus status_;
    double last_report_ = -1;
};

// The tokens of the context saved in `path` (its last commit), read without restoring it; empty
// when the file is missing or unreadable. For "how much is prefilled" displays and for deciding
// whether a saved context is a prefix of the current one; Session::restore still checks the model
// and settings.
std::vector<int32_t> saved_context_tokens(const std::string& path);

}  // namespace sl
