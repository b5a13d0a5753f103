// One loaded model file shared by the app's workers: the chat's answer service and the background
// prefill read the same LoadedModel (immutable after load, model_loader.h), each through its own
// Session on its own thread.
//
// Threading: get() may be called from any thread; the first call loads the file (seconds) while
// other callers wait for it. The LoadedModel lives as long as any holder of the shared_ptr.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>

namespace sl {
struct LoadedModel;
}

namespace sl::desktop {

class SharedModel {
public:
    explicit SharedModel(std::filesystem::path path);
    ~SharedModel();

    SharedModel(const SharedModel&) = delete;
    SharedModel& operator=(const SharedModel&) = delete;

    const std::filesystem::path& path() const { return path_; }
    // The model, loaded on first use. Throws sl::Error naming the file when it cannot be loaded
    // (and tries again on the next call).
    std::shared_ptr<const LoadedModel> get();
    bool loaded() const;

private:
    const std::filesystem::path path_;
    mutable std::mutex mutex_;
    std::shared_ptr<const LoadedModel> model_;
};

}  // namespace sl::desktop
