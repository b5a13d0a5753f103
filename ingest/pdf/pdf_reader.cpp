#include "ingest/pdf/pdf_reader.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <thread>  // std::jthread

#include "core/util/sha256.h"
#include "ingest/ingest_error.h"
#include "ingest/pdf/pdf_open.h"
#include "ingest/pdf/pdf_page.h"
#include "ingest/pdf/pdf_structure.h"

namespace sl::ingest {

namespace {

// Threads that extract pages: the calling thread plus helpers, each with its own Poppler document
// (a Poppler document is not thread-safe; separate ones are). IngestOptions::page_threads decides
// (0: one per core); SIGHTLINE_PDF_THREADS overrides it. Short documents use one thread, since
// opening another Poppler document costs more than their pages.
int thread_count(int pages, int wanted) {
    if (const char* env = std::getenv("SIGHTLINE_PDF_THREADS"); env && *env) wanted = std::atoi(env);
    if (wanted <= 0) wanted = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (pages < 16) return 1;
    return std::clamp(wanted, 1, static_cast<int>(kMaxPdfThreads));
}

class PdfReader final : public Reader {
public:
    const char* name() const override { return "pdf"; }
    std::vector<std::string> extensions() const override { return {"pdf"}; }
    bool sniff(const std::string& head) const override {
        return head.find("%PDF-") != std::string::npos;
    }
    doc::Document read(const std::string& path, IngestContext& ctx) const override;
};

// Pages are handed out in order from a shared counter; each thread writes only its own slots of
// `pages`. The calling thread alone reports progress; every thread polls cancellation per page.
struct PageJobs {
    int n = 0;
    std::vector<PdfPageResult> pages;
    std::atomic<int> next{0}, done{0};
    std::atomic<bool> failed{false};
    std::mutex mu;  // guards error, ocr_error
    std::exception_ptr error;
    std::string ocr_error;

    // Reads pages from `pdf` until none are left, the read is cancelled or a thread failed.
    void work(const Poppler::Document& pdf, IngestContext& ctx, bool report) {
        PdfPageReader reader(pdf, ctx.options());
        const std::function<bool()> cancelled = [&] { return ctx.cancelled() || failed; };
        try {
            for (int i; (i = next.fetch_add(1)) < n;) {
                if (cancelled()) break;
                if (report)
                    ctx.progress(static_cast<double>(done.load()) / n,
                                 "page " + std::to_string(i + 1) + " of " + std::to_string(n));
                pages[static_cast<size_t>(i)] = reader.read(i, cancelled);
                done.fetch_add(1);
            }
        } catch (...) {
            const std::lock_guard lock(mu);
            if (!error) error = std::current_exception();
            failed = true;
        }
        const std::lock_guard lock(mu);
        if (ocr_error.empty()) ocr_error = reader.ocr_error();
    }
};

doc::Document PdfReader::read(const std::string& path, IngestContext& ctx) const {
    ctx.check_cancelled(path);
    const IngestOptions& opt = ctx.options();
    const std::unique_ptr<Poppler::Document> pdf = open_pdf(path);
    const int n = pdf->numPages();
    if (n <= 0) throw IngestError(IngestErrorKind::Corrupt, path, "the PDF has no pages");
    if (n > opt.max_pages)
        throw IngestError(IngestErrorKind::TooLarge, path,
                          "the PDF has " + std::to_string(n) + " pages, over the limit of " +
                              std::to_string(opt.max_pages));

    doc::Document d;
    d.path = path;
    d.kind = doc::DocumentKind::Pdf;
    d.id = sha256_file_hex(path);
    read_pdf_metadata(*pdf, path, d);
    d.outline = read_pdf_outline(*pdf);

    PageJobs jobs;
    jobs.n = n;
    jobs.pages.resize(static_cast<size_t>(n));
    {
        std::vector<std::jthread> helpers;
        const int n_threads = thread_count(n, ctx.options().page_threads);
        for (int t = 1; t < n_threads; ++t) {
            helpers.emplace_back([&jobs, &ctx, &path] {
                std::unique_ptr<Poppler::Document> own;
                try {
                    own = open_pdf(path);
                } catch (...) {
                    return;  // the other threads read its share
                }
                jobs.work(*own, ctx, false);
            });
        }
        jobs.work(*pdf, ctx, true);
    }  // helpers joined
    if (jobs.error) {
        try {
            std::rethrow_exception(jobs.error);
        } catch (const std::bad_alloc&) {
            throw IngestError(IngestErrorKind::TooLarge, path,
                              "reading its pages needs more memory than there is");
        }
    }
    ctx.check_cancelled(path);

    int damaged = 0, ocr_pages = 0;
    d.units.reserve(static_cast<size_t>(n));
    for (PdfPageResult& p : jobs.pages) {
        damaged += p.damaged ? 1 : 0;
        ocr_pages += p.ocr_text ? 1 : 0;
        d.units.push_back(std::move(p.unit));
        d.links.insert(d.links.end(), std::make_move_iterator(p.links.begin()),
                       std::make_move_iterator(p.links.end()));
    }
    if (damaged == n)
        throw IngestError(
            IngestErrorKind::Corrupt, path,
            "the PDF is damaged: none of its " + std::to_string(n) + " pages can be read");
    if (damaged > 0) d.metadata["damaged_pages"] = std::to_string(damaged);
    if (ocr_pages > 0) d.metadata["ocr_pages"] = std::to_string(ocr_pages);
    if (!jobs.ocr_error.empty()) d.metadata["ocr_error"] = jobs.ocr_error;
    ctx.progress(1.0, "done");
    return d;
}

}  // namespace

std::unique_ptr<Reader> make_pdf_reader() {
    return std::make_unique<PdfReader>();
}

}  // namespace sl::ingest
