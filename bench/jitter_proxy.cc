#include "bench/jitter_proxy.h"

#include <boost/asio.hpp>
#include <deque>
#include <random>
#include <thread>

namespace podscope::bench {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// One direction of one connection: a reader queues chunks with their release time, a writer
// sends each when its time comes. Order is kept: a chunk never leaves before the one ahead.
struct Direction : std::enable_shared_from_this<Direction> {
  Direction(tcp::socket& from, tcp::socket& to, asio::io_context& io)
      : from(from), to(to), wake(io) {}
  tcp::socket& from;
  tcp::socket& to;
  asio::steady_timer wake;
  std::deque<std::pair<Clock::time_point, std::string>> queue;
  Clock::time_point last_release{};
  bool closed = false;
};

struct Connection {
  explicit Connection(asio::io_context& io) : client(io), server(io) {}
  tcp::socket client, server;
};

}  // namespace

struct JitterProxy::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  tcp::endpoint target;
  int64_t base_ns, jitter_ns;
  std::mt19937_64 rng;
  std::thread thread;

  Clock::duration Delay() {
    const int64_t extra =
        jitter_ns > 0 ? std::uniform_int_distribution<int64_t>(0, jitter_ns)(rng) : 0;
    return std::chrono::nanoseconds(base_ns + extra);
  }

  asio::awaitable<void> Read(std::shared_ptr<Connection> c, std::shared_ptr<Direction> d) {
    std::array<char, 16384> buffer;
    for (;;) {
      boost::system::error_code ec;
      const size_t n = co_await d->from.async_read_some(
          asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      const Clock::time_point release = std::max(d->last_release, Clock::now() + Delay());
      d->last_release = release;
      d->queue.emplace_back(release, std::string(buffer.data(), n));
      d->wake.cancel();
    }
    d->closed = true;
    d->wake.cancel();
  }

  asio::awaitable<void> Write(std::shared_ptr<Connection> c, std::shared_ptr<Direction> d) {
    for (;;) {
      boost::system::error_code ec;
      if (d->queue.empty()) {
        if (d->closed) break;
        d->wake.expires_at(Clock::time_point::max());
        co_await d->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      if (d->queue.front().first > Clock::now()) {
        d->wake.expires_at(d->queue.front().first);
        co_await d->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      co_await asio::async_write(d->to, asio::buffer(d->queue.front().second),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      d->queue.pop_front();
    }
    boost::system::error_code ignored;
    d->to.shutdown(tcp::socket::shutdown_send, ignored);
  }

  asio::awaitable<void> Accept() {
    for (;;) {
      auto c = std::make_shared<Connection>(io);
      boost::system::error_code ec;
      co_await acceptor.async_accept(c->client, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      co_await c->server.async_connect(target, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) continue;
      c->client.set_option(tcp::no_delay(true));
      c->server.set_option(tcp::no_delay(true));
      auto up = std::make_shared<Direction>(c->client, c->server, io);
      auto down = std::make_shared<Direction>(c->server, c->client, io);
      asio::co_spawn(io, Read(c, up), asio::detached);
      asio::co_spawn(io, Write(c, up), asio::detached);
      asio::co_spawn(io, Read(c, down), asio::detached);
      asio::co_spawn(io, Write(c, down), asio::detached);
    }
  }
};

JitterProxy::JitterProxy(std::string target_host, uint16_t target_port, int64_t base_delay_ns,
                         int64_t jitter_ns, uint64_t seed)
    : impl_(std::make_unique<Impl>()) {
  impl_->target = tcp::endpoint(asio::ip::make_address(target_host), target_port);
  impl_->base_ns = base_delay_ns;
  impl_->jitter_ns = jitter_ns;
  impl_->rng.seed(seed);
  asio::co_spawn(impl_->io, impl_->Accept(), asio::detached);
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

JitterProxy::~JitterProxy() {
  impl_->io.stop();
  impl_->thread.join();
}

uint16_t JitterProxy::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace podscope::bench
