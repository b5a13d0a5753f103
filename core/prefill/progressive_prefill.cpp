#include "core/prefill/progressive_prefill.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <span>

#include "core/kvcache/kv_file.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/mapped_file.h"

namespace sl {

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool is_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    return static_cast<int64_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first - a.begin());
}

// The tokens and attention signature a saved context records (headers only); empty when unreadable.
struct SavedHead {
    std::vector<int32_t> tokens;
    std::string attention;
};
SavedHead saved_head(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return {};
    try {
        MappedFile file(path);
        KvFileContents c = parse_kv_file(file.bytes(), path, KvVerify::Headers);
        if (c.base.empty()) return {std::move(c.tokens), c.info.attention};
        // A delta file: its first tokens are its base's.
        const std::string base_path = (std::filesystem::path(path).parent_path() / c.base.name).string();
        MappedFile base_file(base_path);
        const KvFileContents b = parse_kv_file(base_file.bytes(), base_path, KvVerify::Headers);
        if (!b.base.empty() || b.tokens.size() < c.base.tokens || kv_tokens_hash(b.tokens, c.base.tokens) != c.base.hash) return {};
        std::vector<int32_t> tokens(b.tokens.begin(), b.tokens.begin() + static_cast<std::ptrdiff_t>(c.base.tokens));
        tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
        return {std::move(tokens), c.info.attention};
    } catch (const Error&) {
        return {};
    }
}

}  // namespace

std::vector<int32_t> saved_context_tokens(const std::string& path) { return saved_head(path).tokens; }

ProgressivePrefill::ProgressivePrefill(Session& session, std::vector<int32_t> tokens, std::string path,
                                       PrefillOptions options)
    : session_(session), tokens_(std::move(tokens)), path_(std::move(path)), options_(options) {
    status_.total = static_cast<int64_t>(tokens_.size());
}

ProgressivePrefill::~ProgressivePrefill() {
    cancel();
    wait();
}

PrefillStatus ProgressivePrefill::status() const {
    std::lock_guard lock(mutex_);
    return status_;
}

void ProgressivePrefill::start() {
    if (thread_.joinable() || running_.load()) throw Error("progressive prefill: already started");
    running_.store(true);
    thread_ = std::thread([this] { run(); });
}

void ProgressivePrefill::wait() {
    if (thread_.joinable()) thread_.join();
}

void ProgressivePrefill::report(bool force) {
    const double t = now_seconds();
    if (!force && last_report_ >= 0 && t - last_report_ < options_.progress_interval) return;
    last_report_ = t;
    if (on_progress) on_progress(status());
}

// Restores the saved file when it holds a prefix of tokens_; otherwise starts from an empty session.
void ProgressivePrefill::resume() {
    std::string note;
    const std::vector<int32_t> saved = saved_context_tokens(path_);
    if (!saved.empty() && is_prefix(saved, tokens_)) {
        try {
            session_.restore(path_);
        } catch (const Error& e) {
            note = std::string("saved context not used: ") + e.what();
            session_.reset();
        }
    } else {
        if (!saved.empty()) note = "saved context not used: " + path_ + " holds another context";
        else if (std::filesystem::exists(path_)) note = "saved context not used: " + path_ + " is unreadable";
        session_.reset();
    }
    if (!is_prefix(session_.tokens(), tokens_)) {  // restore() succeeded on a file that changed meanwhile
        note = "saved context not used: " + path_ + " changed while it was read";
        session_.reset();
    }
    // Nothing of our own: the seed sharing the longest prefix, made by the same attention.
    std::string seed;
    if (session_.tokens().empty() && !options_.seeds.empty()) {
        const std::string want = session_.attention().signature();
        int64_t best = 0;
        for (const std::string& s : options_.seeds) {
            if (s == path_) continue;
            const SavedHead h = saved_head(s);
            const int64_t n = common_prefix(h.tokens, tokens_);
            if (h.attention == want && n >= std::max<int64_t>(1, options_.min_seed_tokens) && n > best) {
                best = n;
                seed = s;
            }
        }
        if (!seed.empty()) {
            try {
                session_.restore(seed);
                session_.truncate(common_prefix(session_.tokens(), tokens_));
                if (!note.empty()) note += "; ";
                note += "reused the first " + std::to_string(session_.tokens().size()) + " tokens of " + seed;
            } catch (const Error& e) {
                if (!note.empty()) note += "; ";
                note += std::string("seed not used: ") + e.what();
                session_.reset();
                seed.clear();
            }
        }
    }
    std::lock_guard lock(mutex_);
    status_.done = status_.resumed_from = static_cast<int64_t>(session_.tokens().size());
    status_.saved = seed.empty() ? status_.done : 0;  // a seed's prefix is in `path` after the first save
    status_.seed = seed;
    status_.note = note;
}

namespace {
// Tokens prefilled between checks of cancel() inside a chunk (the session's default batch).
constexpr int64_t kCancelStep = 256;
}  // namespace

void ProgressivePrefill::run() {
    running_.store(true);
    try {
        resume();
        report(true);
        const auto total = static_cast<int64_t>(tokens_.size());
        const int64_t step = std::max<int64_t>(1, options_.save_every);
        const double t0 = now_seconds();
        int64_t start_done = static_cast<int64_t>(session_.tokens().size());
        bool saved_all = start_done == total && start_done > 0;
        // A page of the restored file or seed that fails its check when first read (restores check
        // pages lazily): that file goes (it would be read again next time) and the prefill starts
        // over from an empty session; the next save writes `path` anew.
        auto damaged = [&](const DamagedContextError& e) {
            std::error_code ec;
            std::filesystem::remove(e.path(), ec);
            session_.reset();
            start_done = 0;
            std::lock_guard lock(mutex_);
            status_.note += (status_.note.empty() ? "" : "; ") + std::string(e.what()) + "; removed it and started over";
            status_.done = status_.saved = status_.resumed_from = 0;
            status_.seed.clear();
        };
        if (saved_all && !status().seed.empty()) {  // a seed held the whole context: write it to our file
            try {
                session_.save(path_);
                std::lock_guard lock(mutex_);
                status_.saved = total;
            } catch (const DamagedContextError& e) {
                damaged(e);
                saved_all = false;
            }
        }
        while (!cancel_.load()) {
            const auto done = static_cast<int64_t>(session_.tokens().size());
            if (done >= total) break;
            const int64_t n0 = std::min(step, total - done);
            // The chunk in steps of kCancelStep tokens (the session's batches), so that cancel()
            // stops within it: what was prefilled is saved below, a valid prefix like any other.
            int64_t n = 0;
            bool over = false;
            try {
                while (n < n0 && !cancel_.load()) {
                    const int64_t m = std::min(kCancelStep, n0 - n);
                    session_.prefill(std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(done + n), static_cast<size_t>(m)));
                    n += m;
                }
                if (n > 0) session_.save(path_);
            } catch (const DamagedContextError& e) {
                damaged(e);
                over = true;
            }
            if (over) continue;
            if (n == 0) break;
            const double secs = now_seconds() - t0;
            {
                std::lock_guard lock(mutex_);
                status_.done = status_.saved = done + n;
                status_.seconds = secs;
                status_.tokens_per_second = secs > 0 ? static_cast<double>(status_.done - start_done) / secs : 0;
                status_.eta_seconds = status_.tokens_per_second > 0
                                          ? static_cast<double>(total - status_.done) / status_.tokens_per_second
                                          : -1;
            }
            saved_all = done + n == total;
            report(false);
        }
        std::lock_guard lock(mutex_);
        status_.finished = saved_all && static_cast<int64_t>(session_.tokens().size()) == total;
        status_.cancelled = !status_.finished && cancel_.load();
        if (status_.finished) status_.eta_seconds = 0;
    } catch (const std::exception& e) {
        std::lock_guard lock(mutex_);
        status_.error = e.what();
    }
    running_.store(false);
    report(true);
}

}  // namespace sl
