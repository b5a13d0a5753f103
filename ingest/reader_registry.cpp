#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/util/sha256.h"
#include "ingest/ingest_error.h"
#include "ingest/reader.h"
#include "ingest/readers.h"

namespace sl::ingest {

const std::vector<std::unique_ptr<Reader>>& readers() {
    static const std::vector<std::unique_ptr<Reader>> list = [] {
        std::vector<std::unique_ptr<Reader>> v;
        register_builtin_readers(v);
        return v;
    }();
    return list;
}

const Reader* reader_for(const std::string& path) {
    std::string head(64, '\0');
    {
        std::ifstream f(path, std::ios::binary);
        f.read(head.data(), static_cast<std::streamsize>(head.size()));
        head.resize(static_cast<size_t>(f.gcount()));
    }
    for (const auto& r : readers())
        if (r->sniff(head)) return r.get();
    std::string ext = std::filesystem::path(path).extension().string();
    if (!ext.empty()) ext.erase(0, 1);
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& r : readers())
        for (const auto& e : r->extensions())
            if (e == ext) return r.get();
    return nullptr;
}

doc::Document read_document(const std::string& path, IngestContext& ctx) {
    // Name the real problem: a folder, a pipe or a device is not "missing".
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    switch (st.type()) {
        case std::filesystem::file_type::regular: break;
        case std::filesystem::file_type::not_found:
            throw IngestError(IngestErrorKind::Io, path, "no such file");
        case std::filesystem::file_type::directory:
            throw IngestError(IngestErrorKind::Io, path, "a folder, not a file (add reads folders; ingest takes files)");
        case std::filesystem::file_type::fifo:
            throw IngestError(IngestErrorKind::Io, path, "a pipe (FIFO), not a file");
        case std::filesystem::file_type::socket:
            throw IngestError(IngestErrorKind::Io, path, "a socket, not a file");
        case std::filesystem::file_type::block:
        case std::filesystem::file_type::character:
            throw IngestError(IngestErrorKind::Io, path, "a device, not a file");
        default:
            throw IngestError(IngestErrorKind::Io, path,
                              ec ? "cannot be examined: " + ec.message() : std::string("not a regular file"));
    }
    const Reader* r = reader_for(path);
    if (!r) throw IngestError(IngestErrorKind::Unsupported, path, "not a format Sightline reads (PDF, PPTX, DOCX, EPUB, HTML, Markdown, text, images, audio, video)");
    doc::Document d = r->read(path, ctx);
    if (d.path.empty()) d.path = path;
    if (d.id.empty()) d.id = sha256_file_hex(path);
    return d;
}

}  // namespace sl::ingest
