// Video ingest speed on a 10-minute 720p H.264 file (testsrc2, 30 fps, keyframe every 250 frames),
// made once with the ffmpeg CLI and cached next to this executable. Reports the speed as x realtime
// (media seconds per wall second; goal >= 100x at the default cap of 6 frames a minute with two
// decoder threads) and the process's peak RSS. Side by side: the default, one decoder thread, a
// dense cap (every GOP decoded) and no thumbnails.
#include <benchmark/benchmark.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/resource.h>

#include "ingest/ingest_error.h"
#include "ingest/video/media_reader.h"

namespace {

namespace fs = std::filesystem;

// The cached test video, made on first use; "" when ffmpeg cannot make it.
const std::string& test_video() {
    static const std::string path = [] {
        std::error_code ec;
        fs::path dir = fs::canonical("/proc/self/exe", ec).parent_path();
        if (ec) dir = fs::current_path();
        const fs::path file = dir / "bench_video_720p_10min.mp4";
        if (fs::is_regular_file(file, ec) && fs::file_size(file, ec) > 0) return file.string();
        const fs::path tmp = dir / "bench_video_720p_10min.tmp.mp4";
        const std::string cmd =
            "ffmpeg -hide_banner -loglevel error -nostdin -y -f lavfi -i "
            "testsrc2=size=1280x720:rate=30 -t 600 -c:v libx264 -preset ultrafast -g 250 "
            "-pix_fmt yuv420p -threads 2 '" +
            tmp.string() + "'";
        std::fprintf(stderr, "bench_video: making %s (once; about a minute)\n", file.c_str());
        if (std::system(cmd.c_str()) != 0) return std::string();
        fs::rename(tmp, file, ec);
        return ec ? std::string() : file.string();
    }();
    return path;
}

double peak_rss_mb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

void BM_ingest_video(benchmark::State& state, double cap, int threads, int thumbnail_px) {
    const std::string& path = test_video();
    if (path.empty()) {
        state.SkipWithError("could not make the test video with ffmpeg");
        return;
    }
    sl::ingest::IngestOptions options;
    options.max_frames_per_minute = cap;
    options.thumbnail_px = thumbnail_px;
    options.transcribe = false;
    sl::ingest::MediaReadOptions media;
    media.decoder_threads = threads;
    double media_s = 0, wall_s = 0, frames = 0, decoded = 0;
    for (auto _ : state) {
        sl::ingest::IngestContext ctx(options);
        const auto t0 = std::chrono::steady_clock::now();
        try {
            const sl::doc::Document d = sl::ingest::read_media_file(path, ctx, media);
            media_s += d.duration;
            frames += std::atof(d.metadata.at("sampled_frames").c_str());
            decoded += std::atof(d.metadata.at("decoded_frames").c_str());
            benchmark::DoNotOptimize(d.units.data());
        } catch (const sl::Error& e) {
            state.SkipWithError(e.what());
            return;
        }
        wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const auto n = static_cast<double>(state.iterations());
    state.counters["x_realtime"] = media_s / wall_s;
    state.counters["frames"] = frames / n;
    state.counters["decoded"] = decoded / n;
    state.counters["peak_rss_MB"] = peak_rss_mb();
}

}  // namespace

BENCHMARK_CAPTURE(BM_ingest_video, cap6_2threads, 6.0, 2, 256)
    ->Unit(benchmark::kSecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ingest_video, cap6_1thread, 6.0, 1, 256)
    ->Unit(benchmark::kSecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ingest_video, cap6_no_thumbnails, 6.0, 2, 0)
    ->Unit(benchmark::kSecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ingest_video, cap30_every_gop, 30.0, 2, 256)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

BENCHMARK_MAIN();
