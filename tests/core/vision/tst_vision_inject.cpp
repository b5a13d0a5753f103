// Image embeddings in a language model's context: a tiny random-weight mmproj encodes an image,
// MultimodalStreamBuilder wraps it with the Idefics3 tokens between chat text, and a tiny llama
// model (make_tiny_model.py, width 64 = the projector's) runs it through forward(..., embeddings).
// Checks: the injection path is exact (token-embedding rows fed as embeddings give the token's
// logits), image positions change the output (vs the text-only fallback and vs another image),
// and every position's provenance (visual, tile, region, timestamp) is kept.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/runtime/linear.h"
#include "core/runtime/thread_pool.h"
#include "core/util/assets.h"
#include "core/util/error.h"
#include "core/vision/patch_tokens.h"
#include "core/vision/vision_encoder.h"
#include "tests/common/test_support.h"
#include "tests/core/vision/vision_test_util.h"

namespace {

std::vector<float> run(const sl::LoadedModel& m, const std::vector<int32_t>& tokens, const float* embeddings) {
    const auto& c = m.model->config();
    sl::ThreadPool pool(2);
    sl::KvCache kv(c.n_layer, static_cast<int>(tokens.size()), c.n_kv_head, c.head_dim);
    sl::DenseAttention att;
    sl::ForwardScratch scratch;
    std::vector<float> logits(tokens.size() * static_cast<size_t>(c.n_vocab));
    m.model->forward(tokens.data(), static_cast<int>(tokens.size()), 0, kv, att, pool, scratch, logits.data(), true,
                     embeddings);
    return logits;
}

sl::RgbImage random_image(int w, int h) {
    sl::RgbImage img;
    img.width = w;
    img.height = h;
    img.rgb.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : img.rgb) b = static_cast<uint8_t>(byte(sl::test::rng()));
    return img;
}

}  // namespace

class TstVisionInject : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void injectionIsExact();
    void imageChangesTheAnswer();
    void provenance();
    void chunkedPrefillEqualsOnePass();
    void gemma3ImageInGemmaModel();
    void gemma3WrappersAreSingleTokens();
    void bidirectionalRunMatchesReference();

private:
    QTemporaryDir dir_;
    std::unique_ptr<sl::LoadedModel> lm_;
    std::unique_ptr<sl::LoadedVisionModel> vm_;
};

void TstVisionInject::initTestCase() {
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    const QString lm = dir_.filePath(QStringLiteral("lm.gguf")), mm = dir_.filePath(QStringLiteral("mmproj.gguf"));
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), lm,
                                       QStringLiteral("--d-model"), QStringLiteral("64")}, nullptr));
    QVERIFY(sl::test::make_mmproj(mm, {QStringLiteral("--out-embd"), QStringLiteral("64"), QStringLiteral("--longest-edge"), QStringLiteral("64")}));
    lm_ = sl::load_model(lm.toStdString());
    vm_ = sl::load_mmproj(mm.toStdString());
    sl::check_vision_fits_lm(vm_->model.config, lm_->model->config().d_model, mm.toStdString());
}

void TstVisionInject::injectionIsExact() {
    QVERIFY(lm_);
    // Feed token-embedding rows as "image" embeddings: the logits must equal the tokens' own.
    const auto& c = lm_->model->config();
    std::vector<int32_t> ids{1, 40, 41, 42, 43, 44, 2, 7, 100, 200};
    std::vector<int32_t> marked = ids;
    std::vector<float> emb(ids.size() * static_cast<size_t>(c.d_model), 0.0f);
    for (size_t i = 2; i < 8; ++i) {
        marked[i] = sl::LlamaModel::kEmbeddingToken;
        sl::embed_row(lm_->model->weights().tok_embd, ids[i], emb.data() + i * static_cast<size_t>(c.d_model));
    }
    const std::vector<float> want = run(*lm_, ids, nullptr);
    const std::vector<float> got = run(*lm_, marked, emb.data());
    const double err = sl::test::normalized_error(got.data(), want.data(), want.size());
    QVERIFY2(err < 1e-6, qPrintable(QString::number(err)));
}

void TstVisionInject::imageChangesTheAnswer() {
    QVERIFY(lm_);
    sl::ThreadPool pool(2);
    sl::VisionEncoder enc(vm_->model, pool);
    const sl::VisionConfig& vc = vm_->model.config;
    const auto stream_for = [&](const sl::RgbImage& img) {
        const sl::ImageTokenLayout layout = sl::image_token_layout(vc, img.width, img.height);
        const sl::EncodedImage e = sl::encode_image(enc, img);
        sl::MultimodalStreamBuilder b(*lm_->tokenizer, lm_->model->config().d_model);
        b.add_text("<|im_start|>user\n");
        b.add_image(layout, e, 0);
        b.add_text("What is in this image?<|im_end|>\n<|im_start|>assistant\n");
        return b.take();
    };
    const sl::MultimodalStream a = stream_for(random_image(70, 50));
    const sl::MultimodalStream b = stream_for(random_image(70, 50));
    QCOMPARE(a.size(), b.size());
    const int nv = lm_->model->config().n_vocab;
    const auto logits = [&](const sl::MultimodalStream& s) {
        std::vector<float> rows(static_cast<size_t>(s.size()) * static_cast<size_t>(s.width));
        s.fill_embeddings(0, static_cast<int>(s.size()), rows.data());
        return run(*lm_, s.tokens, rows.data());
    };
    const std::vector<float> la = logits(a), lb = logits(b);
    for (float v : la) QVERIFY(std::isfinite(v));
    // Text-only fallback: the same positions as plain tokens (what OCR text would occupy).
    std::vector<int32_t> text_only = a.tokens;
    for (auto& t : text_only)
        if (t == sl::LlamaModel::kEmbeddingToken) t = 3 + ' ';
    const std::vector<float> lt = run(*lm_, text_only, nullptr);
    const size_t last = (static_cast<size_t>(a.size()) - 1) * static_cast<size_t>(nv);
    const double d_text = sl::test::normalized_error(la.data() + last, lt.data() + last, static_cast<size_t>(nv));
    const double d_image = sl::test::normalized_error(la.data() + last, lb.data() + last, static_cast<size_t>(nv));
    qInfo("%lld positions (%zu embedding rows); last-position logits differ from text-only by %.3f, from another image by %.3f",
          static_cast<long long>(a.size()), a.embeddings.size() / static_cast<size_t>(a.width), d_text, d_image);
    QVERIFY(d_text > 1e-3);
    QVERIFY(d_image > 1e-4);
    // Positions before the image do not see it (causal): identical logits.
    const double before = sl::test::normalized_error(la.data(), lb.data(), static_cast<size_t>(a.spans[0].end) * static_cast<size_t>(nv));
    QCOMPARE(before, 0.0);
}

void TstVisionInject::provenance() {
    QVERIFY(lm_);
    sl::ThreadPool pool(2);
    sl::VisionEncoder enc(vm_->model, pool);
    const sl::VisionConfig& vc = vm_->model.config;
    // A "video frame" at 12.5 s, 60x40: longest edge 64 -> 64x42 -> 64x64: 2x2 tiles + global.
    const sl::RgbImage img = random_image(60, 40);
    const sl::ImageTokenLayout layout = sl::image_token_layout(vc, 60, 40, 12.5);
    QCOMPARE(layout.plan.rows, 2);
    QCOMPARE(layout.plan.cols, 2);
    const sl::EncodedImage e = sl::encode_image(enc, img);
    sl::MultimodalStreamBuilder b(*lm_->tokenizer, 64);
    b.add_text("Lecture:");
    const int64_t image_begin = b.stream().size();
    b.add_image(layout, e, 7, 12.5);
    const int64_t image_end = b.stream().size();
    b.add_text(" end");
    const sl::MultimodalStream s = b.take();

    // The exact count for this tokenizer (its vocabulary lacks the Idefics3 special tokens, so they
    // are spelled out as text) and the count of embedding positions.
    QCOMPARE(image_end - image_begin, static_cast<int64_t>(sl::count_positions(layout, *lm_->tokenizer)));
    int64_t n_emb = 0;
    for (int32_t t : s.tokens) n_emb += t == sl::LlamaModel::kEmbeddingToken;
    QCOMPARE(n_emb, int64_t{5} * vc.tokens_per_tile());
    QCOMPARE(static_cast<int64_t>(s.embeddings.size()), n_emb * 64);

    // Spans cover every position in order.
    int64_t pos = 0;
    for (const auto& sp : s.spans) {
        QCOMPARE(sp.begin, pos);
        QVERIFY(sp.end > sp.begin);
        pos = sp.end;
    }
    QCOMPARE(pos, s.size());
    QCOMPARE(s.span_at(0)->visual, -1);
    QCOMPARE(s.span_at(s.size() - 1)->visual, -1);
    QVERIFY(s.span_at(s.size()) == nullptr);

    // Every image position belongs to visual 7 at 12.5 s; embedding positions know their tile
    // and its region, and carry the row of that tile's embeddings.
    const int T = vc.tokens_per_tile();
    int tiles_seen = 0;
    for (int64_t p = image_begin; p < image_end; ++p) {
        const sl::VisualSpan* sp = s.span_at(p);
        QVERIFY(sp);
        QCOMPARE(sp->visual, 7);
        QCOMPARE(sp->timestamp.value_or(-1), 12.5);
        const bool emb = s.tokens[static_cast<size_t>(p)] == sl::LlamaModel::kEmbeddingToken;
        QCOMPARE(emb, sp->tile >= 0);
        if (!emb) continue;
        const int64_t k = p - sp->begin;  // index within the tile
        if (k == 0) ++tiles_seen;
        const float* row = s.embeddings.data() + static_cast<size_t>(s.embedding_row[static_cast<size_t>(p)]) * 64;
        const float* want = e.embeddings.data() + (static_cast<size_t>(sp->tile) * static_cast<size_t>(T) + static_cast<size_t>(k)) * 64;
        QVERIFY(std::equal(row, row + 64, want));
    }
    QCOMPARE(tiles_seen, 5);
    // Tile 3 (row 1, col 1) is the bottom-right quarter; the global tile (4) is the whole frame.
    for (const auto& sp : s.spans) {
        if (sp.tile == 3) {
            QCOMPARE(sp.region.x0, 0.5f);
            QCOMPARE(sp.region.y0, 0.5f);
            QCOMPARE(sp.region.x1, 1.0f);
            QCOMPARE(sp.region.y1, 1.0f);
        }
        if (sp.tile == 4) QCOMPARE(sp.region.x1 - sp.region.x0, 1.0f);
    }
    // A mismatched encoding is refused.
    const sl::ImageTokenLayout single = sl::image_token_layout(vc, 60, 40, std::nullopt, 0);
    sl::MultimodalStreamBuilder b2(*lm_->tokenizer, 64);
    bool refused = false;
    try {
        b2.add_image(single, e, 0);
    } catch (const sl::Error&) {
        refused = true;
    }
    QVERIFY(refused);
}

void TstVisionInject::chunkedPrefillEqualsOnePass() {
    // Prefill in chunks that cut through the image (fill_embeddings per chunk, as a session does):
    // the last logits equal one pass over the whole stream.
    QVERIFY(lm_);
    sl::ThreadPool pool(2);
    sl::VisionEncoder enc(vm_->model, pool);
    const sl::RgbImage img = random_image(33, 47);
    sl::MultimodalStreamBuilder b(*lm_->tokenizer, 64);
    b.add_text("<|im_start|>user\n");
    b.add_image(sl::image_token_layout(vm_->model.config, 33, 47), sl::encode_image(enc, img), 0);
    b.add_text("Describe it.<|im_end|>\n");
    const sl::MultimodalStream s = b.take();
    const auto& c = lm_->model->config();
    const int n = static_cast<int>(s.size());
    std::vector<float> rows(static_cast<size_t>(n) * 64);
    s.fill_embeddings(0, n, rows.data());
    const std::vector<float> all = run(*lm_, s.tokens, rows.data());

    sl::KvCache kv(c.n_layer, n, c.n_kv_head, c.head_dim);
    sl::DenseAttention att;
    sl::ForwardScratch scratch;
    std::vector<float> logits(static_cast<size_t>(c.n_vocab));
    for (int pos = 0; pos < n;) {
        const int len = std::min(n - pos, 37);
        std::vector<float> chunk(static_cast<size_t>(len) * 64);
        s.fill_embeddings(pos, len, chunk.data());
        lm_->model->forward(s.tokens.data() + pos, len, pos, kv, att, pool, scratch, logits.data(), false, chunk.data());
        pos += len;
    }
    const double err = sl::test::normalized_error(logits.data(), all.data() + static_cast<size_t>(n - 1) * static_cast<size_t>(c.n_vocab),
                                                  static_cast<size_t>(c.n_vocab));
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
}

void TstVisionInject::gemma3ImageInGemmaModel() {
    // Gemma 3's projector into a tiny gemma3 language model (width 64): token embeddings are
    // scaled by sqrt(d) but image rows enter as the projector emits them, so a token's embedding
    // row times sqrt(d) given as an "image" row reproduces the token; an image changes the answer.
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    QTemporaryDir dir;
    const QString lm = dir.filePath(QStringLiteral("g3.gguf")), mm = dir.filePath(QStringLiteral("g3-mmproj.gguf"));
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), lm, QStringLiteral("--arch"),
                                       QStringLiteral("gemma3"), QStringLiteral("--d-model"), QStringLiteral("64")}, nullptr));
    QVERIFY(sl::test::make_mmproj(mm, {QStringLiteral("--family"), QStringLiteral("gemma3"), QStringLiteral("--out-embd"), QStringLiteral("64")}));
    const auto g = sl::load_model(lm.toStdString());
    const auto vm = sl::load_mmproj(mm.toStdString());
    sl::check_vision_fits_lm(vm->model.config, g->model->config().d_model, mm.toStdString());
    const auto& c = g->model->config();
    QVERIFY(c.embed_scale != 1.0f);

    std::vector<int32_t> ids{1, 40, 41, 42, 43, 2, 7};
    std::vector<int32_t> marked = ids;
    std::vector<float> emb(ids.size() * static_cast<size_t>(c.d_model), 0.0f);
    for (size_t i = 1; i < 5; ++i) {
        marked[i] = sl::LlamaModel::kEmbeddingToken;
        float* row = emb.data() + i * static_cast<size_t>(c.d_model);
        sl::embed_row(g->model->weights().tok_embd, ids[i], row);
        for (int j = 0; j < c.d_model; ++j) row[j] *= c.embed_scale;
    }
    const std::vector<float> want = run(*g, ids, nullptr), got = run(*g, marked, emb.data());
    const double err = sl::test::normalized_error(got.data(), want.data(), want.size());
    QVERIFY2(err < 1e-6, qPrintable(QString::number(err)));

    sl::ThreadPool pool(2);
    sl::VisionEncoder enc(vm->model, pool);
    QCOMPARE(sl::image_token_layout(vm->model.config, 70, 50, std::nullopt, 96).plan.n_tiles(), 1);  // never tiled
    const auto stream_for = [&](const sl::RgbImage& img) {
        const sl::ImageTokenLayout layout = sl::image_token_layout(vm->model.config, img.width, img.height, std::nullopt, 96);
        sl::MultimodalStreamBuilder b(*g->tokenizer, c.d_model);
        b.add_text("<start_of_turn>user\n");
        b.add_image(layout, sl::encode_image(enc, img, 96), 0);
        b.add_text("What is this?<end_of_turn>\n<start_of_turn>model\n");
        return b.take();
    };
    const sl::MultimodalStream a = stream_for(random_image(70, 50)), b = stream_for(random_image(70, 50));
    int64_t n_emb = 0;
    for (int32_t t : a.tokens) n_emb += t == sl::LlamaModel::kEmbeddingToken;
    QCOMPARE(n_emb, int64_t{vm->model.config.tokens_per_tile()});
    const auto logits = [&](const sl::MultimodalStream& s) {
        std::vector<float> rows(static_cast<size_t>(s.size()) * static_cast<size_t>(s.width));
        s.fill_embeddings(0, static_cast<int>(s.size()), rows.data());
        return run(*g, s.tokens, rows.data());
    };
    const std::vector<float> la = logits(a), lb = logits(b);
    const size_t last = (static_cast<size_t>(a.size()) - 1) * static_cast<size_t>(c.n_vocab);
    const double d_image = sl::test::normalized_error(la.data() + last, lb.data() + last, static_cast<size_t>(c.n_vocab));
    qInfo("gemma3: %lld positions, %lld image rows; last logits differ between two images by %.3f", static_cast<long long>(a.size()),
          static_cast<long long>(n_emb), d_image);
    QVERIFY(d_image > 1e-4);
}

void TstVisionInject::gemma3WrappersAreSingleTokens() {
    // With the real Gemma 3 vocabulary every wrapper piece is one token: the planner's count is exact.
    REQUIRE_ASSET(path, sl::assets::kGemma3Model);
    const auto g = sl::load_model(path);
    sl::VisionConfig c;
    c.projector = "gemma3";
    c.image_size = 896;
    c.patch_size = 14;
    c.n_embd = 1152;
    c.n_ff = 4304;
    c.n_layer = 27;
    c.n_head = 16;
    c.scale_factor = 4;
    sl::validate_vision_config(c, "gemma3 config");
    for (const char* piece : {"<start_of_image>", "<end_of_image>", "\n\n"})
        QVERIFY2(g->tokenizer->find_token(piece) >= 0, piece);
    const sl::ImageTokenLayout l = sl::image_token_layout(c, 1275, 1650);
    QCOMPARE(l.n_embeddings, 256);
    QCOMPARE(l.n_positions, 260);
    QCOMPARE(sl::count_positions(l, *g->tokenizer), 260);
    QCOMPARE(sl::image_tokens(c, 1280, 720), 260);
    const sl::ImageTokenLayout f = sl::image_token_layout(c, 640, 360, 75.0);
    QCOMPARE(QString::fromStdString(f.pieces[0].text), QStringLiteral("Frame from 01:15:"));
    QCOMPARE(f.n_positions, 261);
}

void TstVisionInject::bidirectionalRunMatchesReference() {
    // Gemma 3's image tokens attend to each other both ways. A tiny gemma3 model (sliding window
    // 6 in its local layers, layer 5 global: both attention paths) runs 23 tokens as [0, 7) causal, [7, 17) one bidirectional call, [17,
    // 23) causal; every position's logits equal the numpy reference with that span unmasked (and
    // differ from the all-causal run after the span starts). Session::prefill with the run gives
    // the same last logits, with dense attention and with MSA (which attends a bidirectional run
    // exactly; blocks of 4 here, so the global layer is sparse).
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    QTemporaryDir dir;
    const QString lm = dir.filePath(QStringLiteral("g3.gguf")), out = dir.filePath(QStringLiteral("ref.bin"));
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), lm, QStringLiteral("--arch"),
                                       QStringLiteral("gemma3"), QStringLiteral("--n-layers"), QStringLiteral("6"),
                                       QStringLiteral("--sliding-window"), QStringLiteral("6"), QStringLiteral("--seed"),
                                       QString::number(sl::test::rng()() % 1000)}, nullptr));
    const auto g = sl::load_model(lm.toStdString());
    const auto& c = g->model->config();
    std::vector<int32_t> ids(23);
    std::uniform_int_distribution<int> tok(3, c.n_vocab - 1);
    for (auto& t : ids) t = tok(sl::test::rng());
    QStringList id_text;
    for (int32_t t : ids) id_text << QString::number(t);
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/gguf_llama_ref.py")), lm, QStringLiteral("--tokens"),
                                       id_text.join(QLatin1Char(',')), QStringLiteral("--bidirectional"), QStringLiteral("7:17"),
                                       QStringLiteral("--logits-out"), out}, nullptr));
    const std::vector<float> want = sl::test::read_floats(out);
    const auto nv = static_cast<size_t>(c.n_vocab);
    QCOMPARE(want.size(), ids.size() * nv);

    sl::ThreadPool pool(2);
    sl::KvCache kv(c.n_layer, static_cast<int>(ids.size()), c.n_kv_head, c.head_dim);
    sl::DenseAttention att;
    sl::ForwardScratch scratch;
    std::vector<float> got(ids.size() * nv);
    const auto run_part = [&](int b, int e, bool causal) {
        g->model->forward(ids.data() + b, e - b, b, kv, att, pool, scratch, got.data() + static_cast<size_t>(b) * nv, true, nullptr,
                          causal);
    };
    run_part(0, 7, true);
    run_part(7, 17, false);
    run_part(17, 23, true);
    const double err = sl::test::normalized_error(got.data(), want.data(), want.size());
    const std::vector<float> causal = run(*g, ids, nullptr);
    const double from_causal = sl::test::normalized_error(causal.data() + 7 * nv, want.data() + 7 * nv, 16 * nv);
    const double before = sl::test::normalized_error(causal.data(), want.data(), 7 * nv);
    qInfo("bidirectional run: error vs reference %.2e; the all-causal run differs by %.3f after position 7, %.2e before", err,
          from_causal, before);
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    QVERIFY(from_causal > 1e-3);
    QVERIFY(before < 1e-5);

    sl::SessionOptions so;
    so.n_ctx = 64;
    so.n_threads = 2;
    so.n_batch = 4;  // runs cut at the batch, the bidirectional one whole
    so.kv_type = sl::KvType::F32;
    so.device = "cpu";
    sl::Session session(*g, so);
    const std::vector<std::pair<int64_t, int64_t>> runs{{7, 17}};
    session.prefill(ids, nullptr, runs);
    const double last = sl::test::normalized_error(session.last_logits().data(), want.data() + 22 * nv, nv);
    QVERIFY2(last < 1e-5, qPrintable(QString::number(last)));

    sl::MsaConfig mc;
    mc.block_size = 4;
    mc.dense_layers = 0;
    mc.top_k = 64;  // every visible block: MSA equals dense to rounding
    so.kv_block = 4;
    auto msa = std::make_unique<sl::MsaAttention>(mc);
    sl::MsaAttention* m = msa.get();
    sl::Session sparse(*g, so, std::move(msa));
    sparse.prefill(ids, nullptr, runs);
    const double last_msa = sl::test::normalized_error(sparse.last_logits().data(), want.data() + 22 * nv, nv);
    QVERIFY2(last_msa < 1e-5, qPrintable(QString::number(last_msa)));
    QVERIFY(m->stats().bidirectional_calls > 0);  // the global layer met the run
    QVERIFY(m->stats().calls > 0);
}

QTEST_GUILESS_MAIN(TstVisionInject)
#include "tst_vision_inject.moc"
