// The library's prefilled context kept in memory between questions: the session a question
// restored from the library prefill (its KV pages, on the device too, and MSA's block index) is
// handed back here after the answer, and the next question on the same saved context takes it
// instead of restoring the file again. A restore reads the file's tokens, maps its pages, builds
// the block index over every key and, on a GPU, uploads all of them (at a million tokens: seconds);
// a warm session is cut back to what the next question shares with it (Session::truncate keeps
// the pages before the cut) and only the rest is prefilled.
//
// Used by owners that answer question after question in one process: the desktop app's answer
// service and `sightline-cli serve` (AskOptions::warm). A held session is taken only when it was
// made the same way the question would make one: the same saved file, unchanged (path, inode,
// size, modification time), the same model object, the same session settings and attention (the
// key ask builds), and a context at least as large as the question needs. Anything else restores
// from the file as before and replaces what was held.
//
// Memory: a held session keeps what a restore allocates (the file's map, the pages written after
// it, the device's copy of the context) while no question runs; clear() gives it back.
//
// Threading: used by one ask at a time (the owner's worker thread). The LoadedModel a held session
// reads must outlive it: owners clear() before their model goes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace sl {

class Session;
class MsaAttention;

// A session as ask keeps it: `saved` tokens restored from the file named in `key`; msa is the
// session's attention when it is MSA (null: dense).
struct WarmSession {
    std::unique_ptr<Session> session;
    MsaAttention* msa = nullptr;
    std::string key;
    int64_t saved = 0;

    WarmSession();
    WarmSession(WarmSession&&) noexcept;
    WarmSession& operator=(WarmSession&&) noexcept;
    ~WarmSession();
};

class WarmContext {
public:
    // complete_only: hold only sessions whose file held the whole library context (the app: its
    // background prefill grows a partial file, which changes it before the next question anyway,
    // and would run beside the held session's memory).
    explicit WarmContext(bool complete_only = false);
    ~WarmContext();
    WarmContext(const WarmContext&) = delete;
    WarmContext& operator=(const WarmContext&) = delete;

    // The held session when its key is `key` and its context holds at least n_ctx positions (moved
    // out: nothing is held afterwards); else none, and what was held is dropped.
    WarmSession take(const std::string& key, int n_ctx);
    // Holds `s` for the next question (replacing what was held), unless complete_only and !complete.
    void keep(WarmSession s, bool complete);
    void clear();
    // Idle time between questions: brings up to max_blocks more of the held session's context
    // from its saved file onto the device (a lazy restore on a GPU leaves it there:
    // Session::fill_device). Returns how many came back (0: nothing held, nothing left, no room:
    // the owner stops asking). A held session that fails here (a damaged page, the device) is
    // dropped: the next question restores from the file. Throws nothing.
    static constexpr int64_t kFillBlocks = 256;  // a slice: ~25 MB of SmolLM2's K/V, ~130 MB of an 8B's
    int64_t fill(int64_t max_blocks = kFillBlocks);
    // The held session, moved out (nothing held afterwards): for an owner that frees it elsewhere
    // than on its own thread (the app's GUI thread hands it to a worker).
    WarmSession release();
    bool holds() const;
    const std::string& key() const { return held_.key; }  // the held session's ("" when none)
    int64_t hits() const { return hits_; }  // sessions take() handed out

private:
    bool complete_only_;
    WarmSession held_;
    int64_t hits_ = 0;
};

}  // namespace sl
