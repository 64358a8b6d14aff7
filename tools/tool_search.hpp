// tool_search: ranking the registry's tools for a few words (list_tools `query`,
// docs/protocol.md §20): Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance
// Framework: BM25 and Beyond", 2009) over one bag of words per tool, built from its fields with
// weights (BM25F-style: the name counts 3×, the title 2×, parameter names 1.5×, the description
// 1×). Words are cut at anything not a letter or digit and at camelCase humps, lower-cased,
// stripped of a plural or -ing/-ed ending, and stop words dropped, the query's as the tools'.
// An inverted index, built once per change to the tools; a query touches only the postings of
// its words. Offline, no model. I/O-thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace meith::tools {

struct tool;

/// The words of `text` as the index keeps them (tokenised, normalised, stop words dropped).
std::vector<std::string> search_terms(std::string_view text);

class tool_index {
  public:
    struct hit {
        const tool* t = nullptr;
        double score = 0; ///< BM25; higher ranks first
    };

    /// Indexes `tools` (each kept by pointer: the index is dropped before they are).
    void build(const std::vector<const tool*>& tools);
    bool built() const { return built_; }
    void clear();

    /// The tools matching any word of `query`, best first (ties by name), at most `limit`,
    /// each passing `keep` (the caller's permission). Empty for a query without words.
    std::vector<hit> search(std::string_view query, std::size_t limit,
                            const std::function<bool(const tool&)>& keep) const;

  private:
    struct posting {
        std::uint32_t doc;
        float tf; ///< weighted term frequency in the document
    };
    std::vector<const tool*> docs_;
    std::vector<float> length_; ///< weighted length of each document
    float average_length_ = 1;
    std::unordered_map<std::string, std::vector<posting>> postings_;
    bool built_ = false;
    mutable std::vector<float> scores_; ///< reused per query
    mutable std::vector<std::uint32_t> touched_;
};

} // namespace meith::tools
