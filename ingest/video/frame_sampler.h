// Which decoded frames a video keeps: scene-aware sampling under a frames-per-minute cap.
//
// The timeline is cut into equal slots, as many as the cap allows over the whole duration
// (floor(cap * duration / 60), at least one; slots of 60 / cap seconds when the duration is
// unknown). Each slot keeps at most one frame: the strongest shot change in it (difference to the
// previous analysed frame over `cut_threshold`), else its first frame. So the cap is honoured,
// frames are spread evenly, and a shot change wins its slot. Streaming: the caller holds only the
// one pending frame of the current slot. Pure logic, no FFmpeg; one instance per video stream,
// used by one thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sl::ingest {

struct SamplerConfig {
    double max_frames_per_minute = 6.0;  // > 0
    double duration = 0;                 // seconds; 0 when unknown
    double cut_threshold = 0.12;         // mean absolute difference of the small frames, 0..1
};

class FrameSampler {
public:
    // Small grayscale frames the caller analyses: kSmallW x kSmallH bytes, row-major.
    static constexpr int kSmallW = 64, kSmallH = 36;

    explicit FrameSampler(const SamplerConfig& config);

    struct Decision {
        bool emit_pending = false;  // first emit (keep) the pending frame of the finished slot
        bool take = false;          // then make this frame the pending one (replacing any)
    };
    // Offers the frame at time t (seconds, strictly increasing across calls) with its small
    // picture (kSmallW * kSmallH bytes).
    Decision offer(double t, std::span<const uint8_t> small);
    // At the end of the stream: whether a pending frame remains to be emitted.
    bool finish();

    double slot_length() const { return slot_; }
    int slot_count() const { return slots_; }  // 0 when the duration is unknown
    // Mean absolute difference of two small frames, in [0, 1].
    static double difference(std::span<const uint8_t> a, std::span<const uint8_t> b);
    int cuts_seen() const { return cuts_; }

private:
    int slot_of(double t) const;

    SamplerConfig config_;
    double slot_ = 10.0;
    int slots_ = 0;
    std::vector<uint8_t> previous_;
    int current_slot_ = -1;
    bool pending_ = false;
    double pending_priority_ = 0;
    int cuts_ = 0;
};

}  // namespace sl::ingest
