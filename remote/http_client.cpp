// http_client: libcurl multi ("multi_socket" API, curl docs: libcurl-multi(3),
// CURLMOPT_SOCKETFUNCTION(3), CURLMOPT_TIMERFUNCTION(3)) on Asio. Curl opens sockets through
// CURLOPT_OPENSOCKETFUNCTION, where the egress check refuses special-use addresses; each socket
// is watched by an asio::posix::stream_descriptor that never owns it (released before curl's
// close callback closes it). Curl's multi functions are not called from inside its callbacks:
// start and cancel made there are posted to the next turn of the loop.
#include "remote/http_client.hpp"

#include "egress/address.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <fmt/format.h>

#include <cctype>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace meith::remote {

std::string_view http_head::header(std::string_view lower_name) const {
    for (const auto& [k, v] : headers)
        if (k == lower_name) return v;
    return {};
}

std::string url_encode(std::string_view s) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields) {
    std::string out;
    for (const auto& [k, v] : fields) {
        if (!out.empty()) out += '&';
        out += url_encode(k);
        out += '=';
        out += url_encode(v);
    }
    return out;
}

namespace {

struct watched_socket {
    explicit watched_socket(asio::posix::stream_descriptor d) : sd(std::move(d)) {}
    asio::posix::stream_descriptor sd;
    int want = 0; ///< CURL_POLL_IN / OUT / INOUT, 0 when curl removed it
    bool reading = false, writing = false, closed = false;
};

std::string address_text(const sockaddr* a) {
    char buf[INET6_ADDRSTRLEN] = "?";
    if (a->sa_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
    else if (a->sa_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf,
                    sizeof buf);
    return buf;
}

bool transient_code(CURLcode c) {
    switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

void global_init() {
    static std::once_flag once;
    static CURLcode rc = CURLE_OK;
    std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
    if (rc != CURLE_OK) throw std::runtime_error("libcurl could not be initialised");
}

/// Whether a failed verification's cause is the chain (no trusted CA vouches for the issuer),
/// not an expired certificate or one for another name: OpenSSL's X509_V_ERR_ codes, as
/// CURLINFO_SSL_VERIFYRESULT gives them (x509_vfy.h).
bool untrusted_issuer(CURL* easy) {
    long result = 0;
    if (curl_easy_getinfo(easy, CURLINFO_SSL_VERIFYRESULT, &result) != CURLE_OK) return false;
    switch (result) {
    case 2:  // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT
    case 18: // X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
    case 19: // X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
    case 20: // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
    case 21: // X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE
        return true;
    default:
        return false;
    }
}

/// "scheme://host:port" of `u` (lower-cased, the scheme's default port filled in), and its
/// scheme; empty when `u` has none of them.
std::pair<std::string, std::string> origin_of(CURLU* u) {
    char *scheme = nullptr, *host = nullptr, *port = nullptr;
    std::pair<std::string, std::string> out;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        out.second = scheme;
        for (auto& c : out.second)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string h = host;
        for (auto& c : h)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out.first = out.second + "://" + h + ":" + port;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    return out;
}

} // namespace

struct transfer {
    http_client::impl* owner = nullptr;
    http_client::request_id id = 0;
    CURL* easy = nullptr;
    curl_slist* header_list = nullptr;
    http_request req;
    http_handlers handlers;
    http_head head;
    bool head_sent = false;
    bool too_large = false;
    std::size_t body_bytes = 0;
    std::string refused;
    long status_now = 0; ///< the status of the response whose headers are arriving
    /// A redirect to another origin, refused: "FROM to another origin, TO".
    std::string redirect_refused;
    char errbuf[CURL_ERROR_SIZE] = {};

    /// Whether a redirect to `location` (absolute or relative) must be refused: it leads to
    /// another origin than the request's URL, by a scheme curl would follow (others curl
    /// refuses itself, saying so). Sets `redirect_refused`.
    bool refuse_redirect(std::string_view location, bool allow_http) {
        const char* now = nullptr;
        if (curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &now) != CURLE_OK || now == nullptr)
            now = req.url.c_str();
        CURLU* from = curl_url();
        CURLU* to = curl_url();
        bool refuse = false;
        if (from != nullptr && to != nullptr &&
            curl_url_set(from, CURLUPART_URL, req.url.c_str(), 0) == CURLUE_OK &&
            curl_url_set(to, CURLUPART_URL, now, 0) == CURLUE_OK &&
            curl_url_set(to, CURLUPART_URL, std::string(location).c_str(),
                         CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK) {
            const auto [from_origin, from_scheme] = origin_of(from);
            const auto [to_origin, to_scheme] = origin_of(to);
            const bool followable = to_scheme == "https" || (allow_http && to_scheme == "http");
            if (followable && !from_origin.empty() && to_origin != from_origin) {
                refuse = true;
                redirect_refused = from_origin + " to another origin, " + to_origin;
            }
        }
        curl_url_cleanup(from);
        curl_url_cleanup(to);
        return refuse;
    }

    /// The final response's head to `on_head`, once.
    void send_head() {
        if (head_sent) return;
        head_sent = true;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &head.status);
        if (handlers.on_head) handlers.on_head(head);
    }

    ~transfer() {
        if (header_list != nullptr) curl_slist_free_all(header_list);
        if (easy != nullptr) curl_easy_cleanup(easy);
    }
};

struct http_client::impl {
    impl(asio::any_io_executor e, egress_policy p)
        : ex(std::move(e)), policy(std::move(p)), timer(ex) {
        global_init();
        multi = curl_multi_init();
        if (multi == nullptr) throw std::runtime_error("curl_multi_init failed");
        curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &impl::on_socket);
        curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
        curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &impl::on_timer);
        curl_multi_setopt(multi, CURLMOPT_TIMERDATA, this);
    }

    ~impl() {
        *alive = false;
        for (auto& [id, t] : transfers)
            curl_multi_remove_handle(multi, t->easy);
        transfers.clear();
        curl_multi_cleanup(multi); // closes cached connections through on_close
        for (auto& [fd, s] : sockets) {
            s->closed = true;
            s->sd.release();
            ::close(fd);
        }
        timer.cancel();
    }

    asio::any_io_executor ex;
    egress_policy policy;
    CURLM* multi = nullptr;
    asio::steady_timer timer;
    std::unordered_map<curl_socket_t, std::shared_ptr<watched_socket>> sockets;
    std::unordered_map<request_id, std::unique_ptr<transfer>> transfers;
    request_id next_id = 1;
    int in_curl = 0; ///< inside curl_multi_socket_action: multi calls must wait a turn
    std::shared_ptr<bool> alive = std::make_shared<bool>(true);

    // ---- curl's callbacks ---------------------------------------------------------------

    static int on_socket(CURL*, curl_socket_t fd, int what, void* userp, void*) {
        auto* self = static_cast<impl*>(userp);
        auto it = self->sockets.find(fd);
        if (it == self->sockets.end()) return 0; // not one of ours: cannot happen
        it->second->want = what == CURL_POLL_REMOVE ? 0 : what;
        self->arm(fd, it->second);
        return 0;
    }

    static int on_timer(CURLM*, long timeout_ms, void* userp) {
        auto* self = static_cast<impl*>(userp);
        if (timeout_ms < 0) {
            self->timer.cancel();
            return 0;
        }
        self->timer.expires_after(std::chrono::milliseconds(timeout_ms));
        self->timer.async_wait(
            [self, alive = std::weak_ptr<bool>(self->alive)](const std::error_code& ec) {
                if (ec || !alive.lock()) return;
                self->action(CURL_SOCKET_TIMEOUT, 0);
            });
        return 0;
    }

    static curl_socket_t on_open(void* clientp, curlsocktype purpose, curl_sockaddr* a) {
        auto* t = static_cast<transfer*>(clientp);
        impl* self = t->owner;
        if (purpose == CURLSOCKTYPE_IPCXN && !self->policy.allow_private_network) {
            const auto kind = egress::special_address_kind(&a->addr);
            if (!kind.empty()) {
                t->refused = fmt::format("{} is a {} address", address_text(&a->addr), kind);
                return CURL_SOCKET_BAD;
            }
        }
        const int fd = ::socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
        if (fd < 0) return CURL_SOCKET_BAD;
        std::error_code ec;
        asio::posix::stream_descriptor sd(self->ex);
        sd.assign(fd, ec);
        if (ec) {
            ::close(fd);
            return CURL_SOCKET_BAD;
        }
        self->sockets[fd] = std::make_shared<watched_socket>(std::move(sd));
        return fd;
    }

    static int on_close(void* clientp, curl_socket_t fd) {
        auto* self = static_cast<impl*>(clientp);
        if (auto it = self->sockets.find(fd); it != self->sockets.end()) {
            it->second->closed = true;
            it->second->sd.release(); // cancels its waits; curl closes the fd
            self->sockets.erase(it);
        }
        return ::close(fd);
    }

    static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* userp) {
        auto* t = static_cast<transfer*>(userp);
        std::string_view line(data, size * n);
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
            line.remove_suffix(1);
        if (line.starts_with("HTTP/")) { // a new response (after a redirect or 100 Continue)
            t->head.headers.clear();
            const auto sp = line.find(' ');
            t->status_now =
                sp == std::string_view::npos
                    ? 0
                    : std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
            return size * n;
        }
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) return size * n;
        std::string name(line.substr(0, colon));
        for (auto& c : name)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
            value.remove_prefix(1);
        // A redirect to another origin is refused before curl follows it: the request's
        // headers (a token, `${secret:…}` headers) and body would go there (issue 40, #17).
        if (name == "location" && t->status_now / 100 == 3 && t->req.max_redirects > 0 &&
            !t->req.cross_origin_redirects &&
            t->refuse_redirect(value, t->owner->policy.allow_private_network))
            return 0; // CURLE_WRITE_ERROR: the transfer ends here
        if (t->head.headers.size() < 200) t->head.headers.emplace_back(name, std::string(value));
        return size * n;
    }

    static std::size_t on_write(char* data, std::size_t size, std::size_t n, void* userp) {
        auto* t = static_cast<transfer*>(userp);
        const std::size_t bytes = size * n;
        t->body_bytes += bytes;
        if (t->body_bytes > t->req.max_body_bytes) {
            t->too_large = true;
            return 0; // CURLE_WRITE_ERROR
        }
        t->send_head();
        if (t->handlers.on_body) t->handlers.on_body(std::string_view(data, bytes));
        return bytes;
    }

    // ---- Asio side ------------------------------------------------------------------------

    void arm(curl_socket_t fd, const std::shared_ptr<watched_socket>& s) {
        if (s->closed) return;
        auto w = std::weak_ptr<bool>(alive);
        if ((s->want & CURL_POLL_IN) != 0 && !s->reading) {
            s->reading = true;
            s->sd.async_wait(asio::posix::stream_descriptor::wait_read,
                             [this, fd, s, w](const std::error_code& ec) {
                                 s->reading = false;
                                 if (ec || s->closed || !w.lock() || (s->want & CURL_POLL_IN) == 0)
                                     return;
                                 action(fd, CURL_CSELECT_IN);
                                 arm(fd, s);
                             });
        }
        if ((s->want & CURL_POLL_OUT) != 0 && !s->writing) {
            s->writing = true;
            s->sd.async_wait(asio::posix::stream_descriptor::wait_write,
                             [this, fd, s, w](const std::error_code& ec) {
                                 s->writing = false;
                                 if (ec || s->closed || !w.lock() || (s->want & CURL_POLL_OUT) == 0)
                                     return;
                                 action(fd, CURL_CSELECT_OUT);
                                 arm(fd, s);
                             });
        }
    }

    void action(curl_socket_t fd, int events) {
        int running = 0;
        ++in_curl;
        curl_multi_socket_action(multi, fd, events, &running);
        --in_curl;
        collect_done();
    }

    void collect_done() {
        int left = 0;
        while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
            if (m->msg != CURLMSG_DONE) continue;
            transfer* t = nullptr;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
            const CURLcode code = m->data.result;
            if (t != nullptr) finish(t, code);
        }
    }

    void finish(transfer* t, CURLcode code) {
        auto it = transfers.find(t->id);
        if (it == transfers.end()) return;
        std::unique_ptr<transfer> owned = std::move(it->second);
        transfers.erase(it);
        curl_multi_remove_handle(multi, t->easy);
        http_outcome out;
        if (!t->redirect_refused.empty()) {
            out.refused = true;
            out.error = "refused a redirect from " + t->redirect_refused;
            out.remedy = "meith sends a source's headers, its token and its requests to the "
                         "origin of its `url` only; if the server has moved, set `url` to where "
                         "it redirects";
        } else if (!t->refused.empty()) {
            out.refused = true;
            out.error = "refused to connect: " + t->refused;
            out.remedy = "a source that means to reach its own network says "
                         "`allow_private_network = true`";
        } else if (code == CURLE_UNSUPPORTED_PROTOCOL && !policy.allow_private_network &&
                   std::string_view(t->errbuf).find("Protocol \"http\"") !=
                       std::string_view::npos) {
            // CURLOPT_(REDIR_)PROTOCOLS_STR is "https": a plain http:// URL or redirect.
            out.refused = true;
            out.error = t->req.url.starts_with("http://")
                            ? "refused a plain http:// URL"
                            : "refused a redirect from https:// to plain http://";
            out.remedy = "only a source that says `allow_private_network = true` speaks plain "
                         "HTTP; give the server's https:// URL";
        } else if (code == CURLE_PEER_FAILED_VERIFICATION && untrusted_issuer(t->easy)) {
            out.refused = true;
            out.error = t->errbuf[0] != '\0' ? std::string(t->errbuf) : curl_easy_strerror(code);
            out.remedy =
                policy.ca_file.empty()
                    ? "the server's certificate is not signed by a CA in the system's store; "
                      "for a server with a private CA, set the source's `ca_file` to that CA's "
                      "PEM file"
                    : fmt::format("the server's certificate is signed neither by a CA in the "
                                  "system's store nor by one in ca_file {}",
                                  policy.ca_file);
        } else if (code == CURLE_SSL_CACERT_BADFILE && !policy.ca_file.empty()) {
            out.refused = true;
            out.error =
                fmt::format("ca_file {} cannot be read as PEM certificates", policy.ca_file);
            out.remedy = "mend the file, or remove `ca_file` to use the system's store alone";
        } else if (t->too_large) {
            out.too_large = true;
            out.error = fmt::format("the response is over {} bytes", t->req.max_body_bytes);
        } else if (code != CURLE_OK) {
            out.error = t->errbuf[0] != '\0' ? std::string(t->errbuf) : curl_easy_strerror(code);
            out.transient = transient_code(code);
        }
        if (out.error.empty()) t->send_head();
        out.head = std::move(t->head);
        if (auto done = std::move(t->handlers.on_done)) {
            owned.reset();
            done(std::move(out));
        }
    }

    request_id start(http_request req, http_handlers handlers) {
        const request_id id = next_id++;
        auto t = std::make_unique<transfer>();
        t->owner = this;
        t->id = id;
        t->req = std::move(req);
        t->handlers = std::move(handlers);
        t->easy = curl_easy_init();
        transfer* raw = t.get();
        if (raw->easy == nullptr) {
            asio::post(ex, [h = std::move(raw->handlers.on_done)] {
                if (!h) return;
                http_outcome out;
                out.error = "curl_easy_init failed";
                h(std::move(out));
            });
            return id;
        }
        configure(*raw);
        transfers.emplace(id, std::move(t));
        if (in_curl > 0) {
            asio::post(ex, [this, id, w = std::weak_ptr<bool>(alive)] {
                if (!w.lock()) return;
                if (auto it = transfers.find(id); it != transfers.end()) add(it->second.get());
            });
        } else {
            add(raw);
        }
        return id;
    }

    void add(transfer* t) {
        if (curl_multi_add_handle(multi, t->easy) != CURLM_OK) {
            std::snprintf(t->errbuf, sizeof t->errbuf, "curl_multi_add_handle failed");
            finish(t, CURLE_FAILED_INIT);
        }
    }

    void configure(transfer& t) {
        CURL* e = t.easy;
        const auto& r = t.req;
        const char* schemes = policy.allow_private_network ? "http,https" : "https";
        curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
        curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.errbuf);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, schemes);
        curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, schemes);
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, r.max_redirects > 0 ? 1L : 0L);
        curl_easy_setopt(e, CURLOPT_MAXREDIRS, static_cast<long>(r.max_redirects));
        curl_easy_setopt(e, CURLOPT_POSTREDIR,
                         static_cast<long>(CURL_REDIR_POST_301 | CURL_REDIR_POST_302));
        curl_easy_setopt(e, CURLOPT_PROXY, ""); // never a proxy from the environment
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
        if (!policy.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, policy.ca_file.c_str());
        curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(r.connect_timeout.count()));
        if (r.timeout.count() > 0)
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout.count()));
        curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &impl::on_open);
        curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &t);
        curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &impl::on_close);
        curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, this);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &impl::on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &impl::on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
        curl_easy_setopt(e, CURLOPT_USERAGENT, "meith/" MEITH_VERSION);
        for (const auto& h : r.headers)
            t.header_list = curl_slist_append(t.header_list, h.c_str());
        if (t.header_list != nullptr) curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.header_list);
        if (r.method == "POST") {
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                             static_cast<curl_off_t>(r.body.size()));
        } else if (r.method != "GET") {
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
        }
    }

    void cancel(request_id id) {
        if (in_curl > 0) {
            asio::post(ex, [this, id, w = std::weak_ptr<bool>(alive)] {
                if (w.lock()) cancel(id);
            });
            return;
        }
        auto it = transfers.find(id);
        if (it == transfers.end()) return;
        curl_multi_remove_handle(multi, it->second->easy);
        transfers.erase(it);
    }
};

http_client::http_client(asio::any_io_executor ex, egress_policy policy)
    : impl_(std::make_unique<impl>(std::move(ex), std::move(policy))) {
}

http_client::~http_client() = default;

http_client::request_id http_client::start(http_request req, http_handlers handlers) {
    return impl_->start(std::move(req), std::move(handlers));
}

void http_client::cancel(request_id id) {
    impl_->cancel(id);
}

std::size_t http_client::active() const {
    return impl_->transfers.size();
}

} // namespace meith::remote
