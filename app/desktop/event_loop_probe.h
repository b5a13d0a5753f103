// Measures how responsive the GUI thread is: a QTimer fires every `interval_ms` and records how
// late each tick was (the event loop was busy for at least that long). GUI thread only.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <vector>

namespace sl::desktop {

class EventLoopProbe : public QObject {
    Q_OBJECT

public:
    explicit EventLoopProbe(int interval_ms = 10, QObject* parent = nullptr);
    void start();
    void stop();
    void reset();

    int ticks() const { return static_cast<int>(delays_ms_.size()); }
    double maxDelayMs() const;          // the worst lateness of a tick
    double percentileDelayMs(double p) const;  // p in [0, 100]

private:
    void tick();

    int interval_ms_;
    QTimer timer_;
    QElapsedTimer clock_;
    qint64 last_ns_ = -1;
    std::vector<double> delays_ms_;
};

}  // namespace sl::desktop
