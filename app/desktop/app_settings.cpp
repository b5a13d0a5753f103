#include "app/desktop/app_settings.h"

#include <algorithm>

#include "core/util/paths.h"

namespace sl::desktop {

AppSettings::AppSettings(const QString& file)
    : settings_(file.isEmpty() ? std::make_unique<QSettings>() : std::make_unique<QSettings>(file, QSettings::IniFormat)) {}

QString AppSettings::modelPath() const {
    return settings_->value(QStringLiteral("model/path"), QString::fromStdString(paths::default_model().string())).toString();
}
void AppSettings::setModelPath(const QString& path) { settings_->setValue(QStringLiteral("model/path"), path); }

Device AppSettings::device() const {
    return settings_->value(QStringLiteral("model/device"), QStringLiteral("cpu")).toString() == QLatin1String("gpu")
               ? Device::Gpu
               : Device::Cpu;
}
void AppSettings::setDevice(Device d) {
    settings_->setValue(QStringLiteral("model/device"), d == Device::Gpu ? QStringLiteral("gpu") : QStringLiteral("cpu"));
}

QString AppSettings::effort() const {
    const QString e = settings_->value(QStringLiteral("answer/effort"), QStringLiteral("medium")).toString();
    return (e == QLatin1String("low") || e == QLatin1String("high")) ? e : QStringLiteral("medium");
}
void AppSettings::setEffort(const QString& e) { settings_->setValue(QStringLiteral("answer/effort"), e); }

int AppSettings::answerContext() const {
    const int v = settings_->value(QStringLiteral("answer/n_ctx"), 0).toInt();
    return v > 0 ? v : 0;
}
void AppSettings::setAnswerContext(int tokens) { settings_->setValue(QStringLiteral("answer/n_ctx"), tokens > 0 ? tokens : 0); }

double AppSettings::temperature() const {
    return std::clamp(settings_->value(QStringLiteral("answer/temperature"), 0.0).toDouble(), 0.0, 2.0);
}
void AppSettings::setTemperature(double t) { settings_->setValue(QStringLiteral("answer/temperature"), std::clamp(t, 0.0, 2.0)); }

int AppSettings::threads() const { return std::clamp(settings_->value(QStringLiteral("engine/threads"), 0).toInt(), 0, 1024); }
void AppSettings::setThreads(int n) { settings_->setValue(QStringLiteral("engine/threads"), std::clamp(n, 0, 1024)); }

bool AppSettings::ocr() const { return settings_->value(QStringLiteral("ingest/ocr"), true).toBool(); }
void AppSettings::setOcr(bool on) { settings_->setValue(QStringLiteral("ingest/ocr"), on); }

QString AppSettings::speechModel() const { return settings_->value(QStringLiteral("speech/model")).toString(); }
void AppSettings::setSpeechModel(const QString& dir) { settings_->setValue(QStringLiteral("speech/model"), dir); }

QString AppSettings::speechCompute() const {
    const QString c = settings_->value(QStringLiteral("speech/compute"), QStringLiteral("default")).toString();
    return c == QLatin1String("q8") || c == QLatin1String("float32") || c == QLatin1String("int8") ? c
                                                                                                     : QStringLiteral("default");
}
void AppSettings::setSpeechCompute(const QString& compute) {
    settings_->setValue(QStringLiteral("speech/compute"), compute);
}

qint64 AppSettings::contextBudget() const {
    return settings_->value(QStringLiteral("context/budget"), qint64{1000000}).toLongLong();
}
void AppSettings::setContextBudget(qint64 tokens) { settings_->setValue(QStringLiteral("context/budget"), tokens); }

qint64 AppSettings::deviceKvBudget() const {
    const qint64 v = settings_->value(QStringLiteral("device/kv_budget_bytes"), 0).toLongLong();
    return v > 0 ? v : 0;
}
void AppSettings::setDeviceKvBudget(qint64 bytes) {
    settings_->setValue(QStringLiteral("device/kv_budget_bytes"), bytes > 0 ? bytes : 0);
}

qint64 AppSettings::kvBudget() const {
    const qint64 v = settings_->value(QStringLiteral("context/kv_budget_bytes"), 0).toLongLong();
    return v > 0 ? v : 0;
}
void AppSettings::setKvBudget(qint64 bytes) {
    settings_->setValue(QStringLiteral("context/kv_budget_bytes"), bytes > 0 ? bytes : 0);
}

qint64 AppSettings::kvCacheCap() const {
    const qint64 v = settings_->value(QStringLiteral("context/kv_cap_bytes"), qint64{2} << 30).toLongLong();
    return v > 0 ? v : qint64{2} << 30;
}
void AppSettings::setKvCacheCap(qint64 bytes) { settings_->setValue(QStringLiteral("context/kv_cap_bytes"), bytes); }

QString AppSettings::visionTowerPath() const { return settings_->value(QStringLiteral("model/mmproj")).toString().trimmed(); }
void AppSettings::setVisionTowerPath(const QString& path) {
    if (path.trimmed().isEmpty()) settings_->remove(QStringLiteral("model/mmproj"));
    else settings_->setValue(QStringLiteral("model/mmproj"), path.trimmed());
}

QString AppSettings::remoteEngineUrl() const { return settings_->value(QStringLiteral("engine/url")).toString().trimmed(); }
void AppSettings::setRemoteEngineUrl(const QString& url) { settings_->setValue(QStringLiteral("engine/url"), url.trimmed()); }
QString AppSettings::remoteEngineModel() const { return settings_->value(QStringLiteral("engine/model")).toString().trimmed(); }
void AppSettings::setRemoteEngineModel(const QString& model) {
    settings_->setValue(QStringLiteral("engine/model"), model.trimmed());
}
QByteArray AppSettings::remoteApiKey() const { return settings_->value(QStringLiteral("engine/api_key")).toByteArray(); }
void AppSettings::setRemoteApiKey(const QByteArray& key) {
    if (key.isEmpty()) settings_->remove(QStringLiteral("engine/api_key"));
    else settings_->setValue(QStringLiteral("engine/api_key"), key);
}

bool AppSettings::confirmHeavyIngest() const {
    return settings_->value(QStringLiteral("ingest/confirm_heavy"), true).toBool();
}
void AppSettings::setConfirmHeavyIngest(bool on) { settings_->setValue(QStringLiteral("ingest/confirm_heavy"), on); }

QString AppSettings::lastDirectory() const { return settings_->value(QStringLiteral("ui/last_dir")).toString(); }
void AppSettings::setLastDirectory(const QString& dir) { settings_->setValue(QStringLiteral("ui/last_dir"), dir); }

QByteArray AppSettings::windowGeometry() const { return settings_->value(QStringLiteral("ui/geometry")).toByteArray(); }
void AppSettings::setWindowGeometry(const QByteArray& g) { settings_->setValue(QStringLiteral("ui/geometry"), g); }
QByteArray AppSettings::windowState() const { return settings_->value(QStringLiteral("ui/state")).toByteArray(); }
void AppSettings::setWindowState(const QByteArray& s) { settings_->setValue(QStringLiteral("ui/state"), s); }

}  // namespace sl::desktop
