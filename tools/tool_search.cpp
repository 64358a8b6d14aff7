// tool_search: BM25 over the tools' weighted fields (see the header).
#include "tools/tool_search.hpp"

#include "tools/tool_source.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cmath>

namespace meith::tools {

namespace {

constexpr float weight_name = 3.0f, weight_title = 2.0f, weight_parameter = 1.5f,
                weight_description = 1.0f;
constexpr double k1 = 1.2, b = 0.75; // the usual BM25 constants (Robertson & Zaragoza §3.5)

bool is_stop_word(std::string_view w) {
    static constexpr std::string_view stop[] = {
        "a",    "an",  "and",  "are",  "as",   "at",  "be",   "by",   "can",   "for",
        "from", "if",  "in",   "into", "is",   "it",  "its",  "of",   "on",    "or",
        "that", "the", "this", "to",   "with", "you", "your", "will", "which", "when"};
    return std::find(std::begin(stop), std::end(stop), w) != std::end(stop);
}

bool is_lower(char c) {
    return c >= 'a' && c <= 'z';
}
bool is_upper(char c) {
    return c >= 'A' && c <= 'Z';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/// A light stemmer, the same for the query and the tools: plurals, -ing, -ed, a final e
/// (so create, creates, created, creating meet as "creat").
void stem(std::string& w) {
    const auto ends = [&](std::string_view s) { return w.size() > s.size() && w.ends_with(s); };
    if (w.size() > 4 && ends("ies")) {
        w.resize(w.size() - 3);
        w += 'y';
    } else if (ends("sses")) {
        w.resize(w.size() - 2);
    } else if (w.size() > 3 && ends("s") && !ends("ss") && !ends("us") && !ends("is")) {
        w.pop_back();
    }
    if (w.size() >= 6 && ends("ing"))
        w.resize(w.size() - 3);
    else if (w.size() >= 5 && ends("ed"))
        w.resize(w.size() - 2);
    if (w.size() > 3 && w.back() == 'e') w.pop_back();
}

/// Calls `add(term)` for each word of `text`.
template <typename F>
void each_term(std::string_view text, F&& add) {
    std::string word;
    const auto flush = [&] {
        if (word.empty()) return;
        if (!is_stop_word(word)) {
            stem(word);
            add(word);
        }
        word.clear();
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (is_lower(c) || is_digit(c)) {
            word += c;
        } else if (is_upper(c)) {
            // A hump starts a word: readFile → read file; HTTPServer → http server.
            const bool after_lower = i > 0 && (is_lower(text[i - 1]) || is_digit(text[i - 1]));
            const bool before_lower =
                i + 1 < text.size() && is_lower(text[i + 1]) && i > 0 && is_upper(text[i - 1]);
            if (after_lower || before_lower) flush();
            word += static_cast<char>(c - 'A' + 'a');
        } else {
            flush();
        }
    }
    flush();
}

/// "title" of a descriptor's extra members (`"title":"…",…`), or empty.
std::string title_of(std::string_view extra_members) {
    if (extra_members.find("\"title\"") == std::string_view::npos) return {};
    simdjson::dom::parser parser;
    const std::string doc = "{" + std::string(extra_members) + "}";
    simdjson::dom::element e;
    std::string_view title;
    if (parser.parse(doc).get(e) == simdjson::SUCCESS &&
        e["title"].get_string().get(title) == simdjson::SUCCESS)
        return std::string(title);
    return {};
}

/// The property names of an input schema (top level), space-separated.
std::string parameter_names(std::string_view schema_json) {
    if (schema_json.empty()) return {};
    simdjson::dom::parser parser;
    simdjson::dom::element e;
    simdjson::dom::object props;
    std::string out;
    if (parser.parse(schema_json.data(), schema_json.size()).get(e) == simdjson::SUCCESS &&
        e["properties"].get_object().get(props) == simdjson::SUCCESS)
        for (auto field : props) {
            out += field.key;
            out += ' ';
        }
    return out;
}

} // namespace

std::vector<std::string> search_terms(std::string_view text) {
    std::vector<std::string> out;
    each_term(text, [&](const std::string& w) { out.push_back(w); });
    return out;
}

void tool_index::clear() {
    docs_.clear();
    length_.clear();
    postings_.clear();
    built_ = false;
}

void tool_index::build(const std::vector<const tool*>& tools) {
    clear();
    docs_ = tools;
    length_.assign(docs_.size(), 0);
    std::unordered_map<std::string, float> tf;
    double total = 0;
    for (std::uint32_t d = 0; d < docs_.size(); ++d) {
        const tool& t = *docs_[d];
        tf.clear();
        const auto add = [&](std::string_view text, float weight) {
            each_term(text, [&](const std::string& w) { tf[w] += weight; });
        };
        add(t.name, weight_name);
        add(title_of(t.extra_descriptor_json), weight_title);
        add(parameter_names(t.input_schema_json), weight_parameter);
        add(t.description, weight_description);
        float len = 0;
        for (const auto& [w, f] : tf) {
            postings_[w].push_back({d, f});
            len += f;
        }
        length_[d] = len;
        total += len;
    }
    average_length_ = docs_.empty() ? 1.0f : static_cast<float>(total / docs_.size());
    if (average_length_ <= 0) average_length_ = 1;
    scores_.assign(docs_.size(), 0);
    built_ = true;
}

std::vector<tool_index::hit>
tool_index::search(std::string_view query, std::size_t limit,
                   const std::function<bool(const tool&)>& keep) const {
    std::vector<std::string> terms = search_terms(query);
    std::sort(terms.begin(), terms.end());
    terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
    touched_.clear();
    const double n = static_cast<double>(docs_.size());
    for (const auto& term : terms) {
        auto it = postings_.find(term);
        if (it == postings_.end()) continue;
        const auto& list = it->second;
        const double df = static_cast<double>(list.size());
        const double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
        for (const auto& p : list) {
            const double norm = 1.0 - b + b * length_[p.doc] / average_length_;
            if (scores_[p.doc] == 0) touched_.push_back(p.doc);
            scores_[p.doc] += static_cast<float>(idf * (p.tf * (k1 + 1.0)) / (p.tf + k1 * norm));
        }
    }
    std::vector<hit> hits;
    hits.reserve(touched_.size());
    for (const auto d : touched_) {
        if (scores_[d] > 0 && keep(*docs_[d])) hits.push_back({docs_[d], scores_[d]});
        scores_[d] = 0;
    }
    const auto better = [](const hit& x, const hit& y) {
        return x.score != y.score ? x.score > y.score : x.t->name < y.t->name;
    };
    if (hits.size() > limit) {
        std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(limit),
                          hits.end(), better);
        hits.resize(limit);
    } else {
        std::sort(hits.begin(), hits.end(), better);
    }
    return hits;
}

} // namespace meith::tools
