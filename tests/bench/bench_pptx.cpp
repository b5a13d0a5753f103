// The PPTX reader: slides per second on a generated 200-slide deck (title, body, table, group and a
// picture on every slide; with and without thumbnails) and on pandoc's real reference deck, plus
// the process's peak RSS (getrusage) after each run.
#include <QBuffer>
#include <QFile>
#include <QImage>

#include <benchmark/benchmark.h>
#include <filesystem>
#include <sys/resource.h>

#include "core/util/paths.h"
#include "ingest/slides/pptx_reader.h"
#include "tests/ingest/slides/pptx_fixture.h"

namespace {

using namespace sl::test::pptx;

constexpr int kSlides = 200;

QByteArray png(int w, int h) {
    QImage img(w, h, QImage::Format_RGB32);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) img.setPixel(x, y, qRgb(x * 255 / w, y * 255 / h, 128));
    QByteArray out;
    QBuffer buf(&out);
    buf.open(QIODevice::WriteOnly);
    img.save(&buf, "PNG");
    return out;
}

const QByteArray& generated_deck() {
    static const QByteArray deck = [] {
        TestDeck d;
        for (int i = 0; i < kSlides; ++i) {
            const std::string n = std::to_string(i + 1);
            TestSlide s =
                title_body_slide("Slide " + n + ": results",
                                 {"First point about " + n, "Second point", "Third point"},
                                 "Speaker notes for slide " + n);
            s.shapes += table({1000000, 4500000, 6000000, 1000000}, {2000000, 4000000},
                              {500000, 500000}, {{"Metric", "Value"}, {"runs", n}});
            s.shapes += group({7000000, 600000, 3000000, 2000000}, {0, 0, 300, 200},
                              sp(20, "", Emu{0, 0, 300, 100}, paragraphs({"Grouped label " + n})));
            s.shapes += pic(30, "rId5", {8000000, 3000000, 3000000, 2000000});
            s.media = {{"rId5", "../media/image" + std::to_string(i % 10 + 1) + ".png"}};
            d.slides.push_back(std::move(s));
        }
        for (int k = 1; k <= 10; ++k)
            d.extra.push_back(
                {"ppt/media/image" + std::to_string(k) + ".png", png(800, 600), false});
        return make_deck(d);
    }();
    return deck;
}

double peak_rss_mib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void BM_pptx_generated(benchmark::State& state) {
    const QByteArray& deck = generated_deck();
    sl::ingest::IngestOptions o;
    o.thumbnail_px = static_cast<int>(state.range(0));
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(deck.constData()),
                                         static_cast<size_t>(deck.size()));
    size_t slides = 0;
    for (auto _ : state) {
        sl::ingest::IngestContext ctx(o);
        const auto d = sl::ingest::read_pptx_bytes(bytes, "generated.pptx", ctx);
        slides += d.units.size();
        benchmark::DoNotOptimize(d.units.data());
    }
    state.counters["slides/s"] =
        benchmark::Counter(static_cast<double>(slides), benchmark::Counter::kIsRate);
    state.counters["deck_KiB"] = static_cast<double>(deck.size()) / 1024.0;
    state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void BM_pptx_pandoc(benchmark::State& state) {
    const std::filesystem::path p = sl::paths::samples_dir() / "pptx" / "pandoc-reference.pptx";
    if (!std::filesystem::is_regular_file(p)) {
        state.SkipWithError("samples/pptx/pandoc-reference.pptx is missing: run scripts/setup.sh");
        return;
    }
    QFile f(QString::fromStdString(p.string()));
    if (!f.open(QIODevice::ReadOnly)) {
        state.SkipWithError("cannot read samples/pptx/pandoc-reference.pptx");
        return;
    }
    const QByteArray data = f.readAll();
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.constData()),
                                         static_cast<size_t>(data.size()));
    size_t slides = 0;
    for (auto _ : state) {
        sl::ingest::IngestContext ctx;
        const auto d = sl::ingest::read_pptx_bytes(bytes, p.string(), ctx);
        slides += d.units.size();
        benchmark::DoNotOptimize(d.units.data());
    }
    state.counters["slides/s"] =
        benchmark::Counter(static_cast<double>(slides), benchmark::Counter::kIsRate);
    state.counters["peak_rss_MiB"] = peak_rss_mib();
}

}  // namespace

BENCHMARK(BM_pptx_generated)
    ->ArgName("thumbnail_px")
    ->Arg(0)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pptx_pandoc)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
