#include "app/desktop/shared_model.h"

#include "core/model/model_loader.h"

namespace sl::desktop {

SharedModel::SharedModel(std::filesystem::path path) : path_(std::move(path)) {}
SharedModel::~SharedModel() = default;

std::shared_ptr<const LoadedModel> SharedModel::get() {
    const std::lock_guard lock(mutex_);
    if (!model_) model_ = load_model(path_);
    return model_;
}

bool SharedModel::loaded() const {
    const std::lock_guard lock(mutex_);
    return model_ != nullptr;
}

}  // namespace sl::desktop
