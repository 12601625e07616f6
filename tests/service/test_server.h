// Fixture helpers: start a SortdServer on 127.0.0.1:0 and connect to it.
#ifndef SORTD_TESTS_SERVICE_TEST_SERVER_H_
#define SORTD_TESTS_SERVICE_TEST_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "client/sortd_client.h"
#include "server/sortd_server.h"

namespace sortd::testing {

inline std::unique_ptr<SortdServer> StartServer(ServerOptions options = {}) {
  options.listen_address = "127.0.0.1:0";
  // No HTTP exposer unless a test asks for one (Scrape reads the registry):
  // civetweb's listener polls in 2 s quanta, which every shutdown waits out.
  if (options.metrics_listen == ServerOptions().metrics_listen) {
    options.metrics_listen.clear();
  } else if (!options.metrics_listen.empty()) {
    options.metrics_listen = "127.0.0.1:0";
  }
  options.dispatcher.engine = EngineChoice::kCpu;
  auto server = SortdServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

inline std::string Target(const SortdServer& server) {
  return "127.0.0.1:" + std::to_string(server.port());
}

// The server's /metrics page as text (registry and scrape-time gauges).
inline std::string Scrape(SortdServer& server) {
  auto families = server.metrics().registry()->Collect();
  auto inflight = server.metrics().inflight_collectable()->Collect();
  families.insert(families.end(), inflight.begin(), inflight.end());
  return prometheus::TextSerializer().Serialize(families);
}

// Value of the sample `name{labels}` in the text exposition, or -1.
inline double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// Scrapes until `done(text)` holds or 10 s pass (observed state, not a
// fixed sleep); returns the last page, for the test's assertions.
inline std::string ScrapeUntil(SortdServer& server,
                               const std::function<bool(const std::string&)>& done) {
  std::string text = Scrape(server);
  for (int i = 0; i < 2000 && !done(text); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    text = Scrape(server);
  }
  return text;
}

// Keys the server's CPU engine has sorted so far (sortd_keys_sorted_total;
// 0 before the first). A call is counted before its status is sent, so
// once a client has its answer, its keys are in.
inline double CpuKeysSorted(SortdServer& server) {
  const double keys = Sample(Scrape(server), R"(sortd_keys_sorted_total{engine="cpu"})");
  return keys < 0 ? 0 : keys;
}

inline std::unique_ptr<client::SortClient> Connect(const SortdServer& server,
                                                   client::ClientOptions options = {}) {
  auto c = client::SortClient::Connect(Target(server), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

}  // namespace sortd::testing

#endif  // SORTD_TESTS_SERVICE_TEST_SERVER_H_
