// Fixture helpers: start a SortdServer on 127.0.0.1:0 and connect to it.
#ifndef SORTD_TESTS_SERVICE_TEST_SERVER_H_
#define SORTD_TESTS_SERVICE_TEST_SERVER_H_

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "client/sortd_client.h"
#include "server/sortd_server.h"

namespace sortd::testing {

inline std::unique_ptr<SortdServer> StartServer(ServerOptions options = {}) {
  options.listen_address = "127.0.0.1:0";
  if (!options.metrics_listen.empty()) options.metrics_listen = "127.0.0.1:0";
  options.dispatcher.engine = EngineChoice::kCpu;
  auto server = SortdServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

inline std::string Target(const SortdServer& server) {
  return "127.0.0.1:" + std::to_string(server.port());
}

inline std::unique_ptr<client::SortClient> Connect(const SortdServer& server,
                                                   client::ClientOptions options = {}) {
  auto c = client::SortClient::Connect(Target(server), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

}  // namespace sortd::testing

#endif  // SORTD_TESTS_SERVICE_TEST_SERVER_H_
