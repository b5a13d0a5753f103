#include "core/ask/unit_embeddings.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "core/answer/verify.h"
#include "core/util/error.h"

namespace sl {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'E', 'M', 'B', '0', '1', '\n'};
constexpr size_t kBatch = 32;

std::string safe_name(std::string s) {
    for (auto& c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) c = '_';
    return s;
}

// Reads a POD value; false at the end of the data.
template <class T>
bool read_pod(std::string_view& in, T& v) {
    if (in.size() < sizeof(T)) return false;
    std::memcpy(&v, in.data(), sizeof(T));
    in.remove_prefix(sizeof(T));
    return true;
}

template <class T>
void write_pod(std::string& out, const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

UnitEmbeddings::UnitEmbeddings(std::filesystem::path dir, Embedder& embedder, size_t passage_chars)
    : dir_(std::move(dir)), embedder_(embedder), passage_chars_(passage_chars) {}

uint64_t UnitEmbeddings::text_hash(std::string_view text) {
    uint64_t h = 1469598103934665603ull;
    for (const char c : text) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return h;
}

std::vector<std::string> UnitEmbeddings::passages(std::string_view text, size_t chars) {
    std::vector<std::string> out;
    // Collapse white space first, so the cut points do not depend on layout.
    std::string t;
    t.reserve(text.size());
    for (const char c : text) {
        const bool ws = c == ' ' || c == '\n' || c == '\r' || c == '\t';
        if (ws) {
            if (!t.empty() && t.back() != ' ') t.push_back(' ');
        } else {
            t.push_back(c);
        }
    }
    while (!t.empty() && t.back() == ' ') t.pop_back();
    if (t.empty()) return out;
    chars = std::max<size_t>(chars, 64);
    // Pieces of about `chars`, the last one not much shorter than the others (even split).
    const size_t n = (t.size() + chars - 1) / chars;
    const size_t target = (t.size() + n - 1) / n;
    size_t b = 0;
    while (b < t.size()) {
        size_t e = std::min(t.size(), b + target);
        if (e < t.size()) {
            const size_t sp = t.rfind(' ', e);
            if (sp != std::string::npos && sp > b + target / 2) e = sp;
            // Never cut inside a UTF-8 sequence.
            while (e < t.size() && (static_cast<unsigned char>(t[e]) & 0xC0) == 0x80) ++e;
        }
        std::string piece = t.substr(b, e - b);
        while (!piece.empty() && piece.front() == ' ') piece.erase(piece.begin());
        if (!piece.empty()) out.push_back(std::move(piece));
        b = e;
    }
    return out;
}

std::filesystem::path UnitEmbeddings::file_of(const std::string& document) const {
    return dir_ / (safe_name(document.substr(0, 24)) + "-" + safe_name(embedder_.name()) + ".emb");
}

UnitEmbeddings::DocFile& UnitEmbeddings::load(const std::string& document) {
    if (auto it = docs_.find(document); it != docs_.end()) return it->second;
    DocFile& f = docs_[document];
    std::string data;
    {
        std::error_code ec;
        const auto path = file_of(document);
        const auto size = std::filesystem::file_size(path, ec);
        if (ec || size > (uint64_t{1} << 32)) return f;
        std::FILE* fp = std::fopen(path.c_str(), "rb");
        if (!fp) return f;
        data.resize(static_cast<size_t>(size));
        const size_t got = data.empty() ? 0 : std::fread(data.data(), 1, data.size(), fp);
        std::fclose(fp);
        if (got != data.size()) return f;
    }
    std::string_view v(data);
    DocFile parsed;
    uint32_t dim = 0, chars = 0, n_units = 0;
    if (v.size() < sizeof kMagic || std::memcmp(v.data(), kMagic, sizeof kMagic) != 0) return f;
    v.remove_prefix(sizeof kMagic);
    if (!read_pod(v, dim) || !read_pod(v, chars) || !read_pod(v, n_units)) return f;
    if (dim == 0 || dim > 8192 || chars != passage_chars_ || (dim_ != 0 && dim != dim_)) return f;
    for (uint32_t u = 0; u < n_units; ++u) {
        uint32_t index = 0, n_pass = 0;
        uint64_t hash = 0;
        if (!read_pod(v, index) || !read_pod(v, hash) || !read_pod(v, n_pass)) return f;
        if (static_cast<uint64_t>(n_pass) * dim * sizeof(float) > v.size()) return f;
        Entry e;
        e.hash = hash;
        e.passages.resize(n_pass, std::vector<float>(dim));
        for (auto& p : e.passages) {
            std::memcpy(p.data(), v.data(), dim * sizeof(float));
            v.remove_prefix(dim * sizeof(float));
        }
        parsed.units[static_cast<int>(index)] = std::move(e);
    }
    if (!v.empty()) return f;  // trailing bytes: not a file we wrote
    dim_ = dim;
    f = std::move(parsed);
    return f;
}

void UnitEmbeddings::save(const std::string& document, const DocFile& f) const {
    std::string out(kMagic, sizeof kMagic);
    write_pod(out, static_cast<uint32_t>(dim_));
    write_pod(out, static_cast<uint32_t>(passage_chars_));
    write_pod(out, static_cast<uint32_t>(f.units.size()));
    for (const auto& [index, e] : f.units) {
        write_pod(out, static_cast<uint32_t>(index));
        write_pod(out, e.hash);
        write_pod(out, static_cast<uint32_t>(e.passages.size()));
        for (const auto& p : e.passages) out.append(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(float));
    }
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::filesystem::path path = file_of(document);
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
        std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
        o.write(out.data(), static_cast<std::streamsize>(out.size()));
        if (!o) {
            std::filesystem::remove(tmp, ec);
            return;  // a cache: failing to write it costs time, not correctness
        }
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
}

std::vector<std::vector<std::vector<float>>> UnitEmbeddings::get(const std::vector<Request>& units,
                                                                 const std::function<void(size_t, size_t)>& progress) {
    std::vector<std::vector<std::vector<float>>> out(units.size());
    // What is missing: (request, passages).
    std::vector<std::pair<size_t, std::vector<std::string>>> todo;
    size_t n_pass = 0;
    for (size_t i = 0; i < units.size(); ++i) {
        const Request& r = units[i];
        DocFile& f = load(r.document);
        const uint64_t h = text_hash(r.text);
        if (auto it = f.units.find(r.unit); it != f.units.end() && it->second.hash == h) {
            out[i] = it->second.passages;
            continue;
        }
        std::vector<std::string> p = passages(r.text, passage_chars_);
        n_pass += p.size();
        todo.push_back({i, std::move(p)});
    }
    if (todo.empty()) return out;
    // Embed in batches, across units.
    std::vector<std::string> batch;
    std::vector<std::pair<size_t, size_t>> where;  // (todo index, passage index)
    size_t done = 0;
    auto flush = [&]() {
        if (batch.empty()) return;
        std::vector<std::vector<float>> vs = embedder_.embed_many(batch);
        if (vs.size() != batch.size()) throw Error("embedder returned " + std::to_string(vs.size()) + " embeddings for " +
                                                   std::to_string(batch.size()) + " passages");
        for (size_t k = 0; k < vs.size(); ++k) {
            if (dim_ == 0) dim_ = vs[k].size();
            if (vs[k].size() != dim_) throw Error("embedder returned vectors of different sizes");
            const auto [t, pi] = where[k];
            auto& dst = out[todo[t].first];
            if (dst.size() < todo[t].second.size()) dst.resize(todo[t].second.size());
            dst[pi] = std::move(vs[k]);
        }
        done += batch.size();
        batch.clear();
        where.clear();
        if (progress) progress(done, n_pass);
    };
    for (size_t t = 0; t < todo.size(); ++t) {
        for (size_t pi = 0; pi < todo[t].second.size(); ++pi) {
            batch.push_back(todo[t].second[pi]);
            where.push_back({t, pi});
            if (batch.size() >= kBatch) flush();
        }
    }
    flush();
    for (const auto& [i, p] : todo) {
        DocFile& f = load(units[i].document);
        Entry& e = f.units[units[i].unit];
        e.hash = text_hash(units[i].text);
        e.passages = out[i];
        f.dirty = true;
    }
    for (auto& [doc, f] : docs_)
        if (f.dirty) {
            save(doc, f);
            f.dirty = false;
        }
    return out;
}

}  // namespace sl
