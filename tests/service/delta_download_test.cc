// Sorted keys downloaded as delta-coded blocks (PART_ENCODING_DELTA_BLOCKS):
// the C++ client asks, the server encodes each part and the client decodes
// it, for every key type, both orders, pairs and indices, against the
// reference sort; the parts really are coded and smaller; and the protocol
// refuses what it must (unaligned offsets, unknown encodings), while a table
// session is answered with raw parts.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "sortd/v1/session_part_codec.h"
#include "sortd/v1/sorted_blocks.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

namespace part = v1::session_part;
namespace blocks = v1::blocks;

const grpc::internal::RpcMethod kUpload("/sortd.v1.SortService/UploadParts",
                                        grpc::internal::RpcMethod::CLIENT_STREAMING);
const grpc::internal::RpcMethod kDownload("/sortd.v1.SortService/DownloadParts",
                                          grpc::internal::RpcMethod::SERVER_STREAMING);

client::ClientOptions CompressingOptions(size_t compress_min_bytes) {
  client::ClientOptions options;
  options.session_min_bytes = 1;
  options.connections = 3;
  options.part_bytes = 64 << 10;  // several blocks' keys a part? one: 64 KiB of u32 < a block
  options.compress_min_bytes = compress_min_bytes;
  return options;
}

template <typename T>
std::vector<T> Keys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> keys(n);
  for (T& k : keys) {
    if constexpr (std::is_floating_point_v<T>) {
      k = static_cast<T>(static_cast<int64_t>(rng() % 2000001) - 1000000) / 8;
    } else {
      k = static_cast<T>(rng() >> (rng() % 8));
    }
  }
  return keys;
}

template <typename T>
void ExpectCompressedSort(client::SortClient& c, size_t n, v1::SortOrder order, bool indices) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " order " << order << " indices " << indices);
  const std::vector<T> keys = Keys<T>(n, n + order);
  std::vector<T> out(n);
  std::vector<uint64_t> perm_out(indices ? n : 0);
  absl::StatusOr<v1::Engine> engine =
      c.SortInto<T>(keys, absl::MakeSpan(out), order, absl::MakeSpan(perm_out));
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](uint64_t a, uint64_t b) {
    return order == v1::SORT_ORDER_ASCENDING ? keys[a] < keys[b] : keys[b] < keys[a];
  });
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], keys[perm[i]]) << "position " << i;
    if (indices) ASSERT_EQ(perm_out[i], perm[i]) << "position " << i;
  }
}

// A server that codes every session asking for it (--key_encoding=always):
// under the default (auto) a loopback client of the CPU engine gets raw
// keys, which these tests would then never see coded.
std::unique_ptr<SortdServer> StartCodingServer(
    KeyEncodingPolicy policy = KeyEncodingPolicy::kAlways) {
  ServerOptions options;
  options.sessions.key_encoding = policy;
  return StartServer(options);
}

TEST(DeltaDownloadTest, EveryKeyTypeAndOrderComesBackAsTheReferenceSort) {
  auto server = StartCodingServer();
  auto c = Connect(*server, CompressingOptions(1));
  for (v1::SortOrder order : {v1::SORT_ORDER_ASCENDING, v1::SORT_ORDER_DESCENDING}) {
    // Sizes: under one block, whole blocks, a short last block over 3 connections.
    for (size_t n : {size_t{1}, size_t{1000}, size_t{2 * blocks::kBlockKeys},
                     size_t{3 * blocks::kBlockKeys + 11}}) {
      ExpectCompressedSort<uint32_t>(*c, n, order, false);
      ExpectCompressedSort<int32_t>(*c, n, order, true);
      ExpectCompressedSort<float>(*c, n, order, false);
      ExpectCompressedSort<uint64_t>(*c, n, order, true);
      ExpectCompressedSort<int64_t>(*c, n, order, false);
      ExpectCompressedSort<double>(*c, n, order, true);
    }
  }
}

TEST(DeltaDownloadTest, PairsComeBackWithTheirKeys) {
  auto server = StartCodingServer();
  auto c = Connect(*server, CompressingOptions(1));
  const size_t n = 2 * blocks::kBlockKeys + 5;
  const std::vector<uint32_t> keys = Keys<uint32_t>(n, 9);
  std::vector<uint32_t> values(n);
  std::iota(values.begin(), values.end(), 0u);
  absl::StatusOr<client::PairsResult<uint32_t, uint32_t>> sorted =
      c->SortPairs<uint32_t, uint32_t>(keys, values);
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  ASSERT_TRUE(std::is_sorted(sorted->keys.begin(), sorted->keys.end()));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(sorted->keys[i], keys[sorted->values[i]]);
}

// The wire, driven by hand: what the server sends for a session that asked.
class DeltaProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override { StartWith(KeyEncodingPolicy::kAlways); }

  void StartWith(KeyEncodingPolicy policy) {
    client_.reset();
    server_ = StartCodingServer(policy);
    client_ = Connect(*server_);
    channel_ = grpc::CreateChannel(Target(*server_), grpc::InsecureChannelCredentials());
  }

  v1::StartSortSessionResponse StartSession(uint64_t n, int encoding, grpc::Status* status,
                                            bool table = false) {
    v1::StartSortSessionRequest request;
    request.set_total_keys(n);
    request.set_key_encoding(static_cast<v1::PartEncoding>(encoding));
    if (table) {
      auto* column = request.add_columns();
      column->set_type(v1::ELEMENT_TYPE_UINT32);
      request.add_by()->set_column(0);
    } else {
      request.set_key_type(v1::ELEMENT_TYPE_UINT32);
    }
    v1::StartSortSessionResponse response;
    grpc::ClientContext ctx;
    *status = client_->stub().StartSortSession(&ctx, request, &response);
    return response;
  }

  grpc::Status UploadAndFinish(const std::string& id, const std::vector<uint32_t>& keys,
                               int array = v1::SESSION_ARRAY_KEYS) {
    grpc::ClientContext ctx;
    grpc::ByteBuffer response;
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel_.get(), kUpload,
                                                                      &ctx, &response));
    part::Header header{id, array, 0};
    auto* copy = new std::vector<uint32_t>(keys);
    writer->Write(part::Encode(header, copy->data(), copy->size() * 4,
                               [](void* p) { delete static_cast<std::vector<uint32_t>*>(p); },
                               copy));
    writer->WritesDone();
    grpc::Status uploaded = writer->Finish();
    if (!uploaded.ok()) return uploaded;
    grpc::ClientContext finish_ctx;
    v1::FinishSortSessionRequest finish;
    finish.set_session_id(id);
    v1::FinishSortSessionResponse finished;
    return client_->stub().FinishSortSession(&finish_ctx, finish, &finished);
  }

  struct Part {
    part::Header header;
    std::vector<uint8_t> body;
  };
  grpc::Status Download(const std::string& id, int array, uint64_t offset, std::vector<Part>* out,
                        uint64_t part_bytes = 0) {
    v1::DownloadPartsRequest request;
    request.set_session_id(id);
    request.set_array(static_cast<v1::SessionArray>(array));
    request.set_offset(offset);
    request.set_part_bytes(part_bytes);
    grpc::ByteBuffer bytes;
    bool own = false;
    grpc::SerializationTraits<v1::DownloadPartsRequest>::Serialize(request, &bytes, &own);
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), kDownload,
                                                                      &ctx, bytes));
    grpc::ByteBuffer message;
    while (reader->Read(&message)) {
      part::Reader in(&message);
      Part p;
      EXPECT_TRUE(in.Start(&p.header)) << in.error();
      p.body.resize(in.body_bytes());
      EXPECT_TRUE(in.ReadBody(p.body.data())) << in.error();
      out->push_back(std::move(p));
    }
    return reader->Finish();
  }

  std::unique_ptr<SortdServer> server_;
  std::unique_ptr<client::SortClient> client_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(DeltaProtocolTest, KeysComeAsSmallerBlocksCoveringTheirRange) {
  const uint64_t n = 3 * blocks::kBlockKeys + 100;
  grpc::Status status;
  const v1::StartSortSessionResponse started =
      StartSession(n, v1::PART_ENCODING_DELTA_BLOCKS, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(started.key_encoding(), v1::PART_ENCODING_DELTA_BLOCKS);
  std::vector<uint32_t> keys(n);
  std::mt19937 rng(1);
  for (uint32_t& k : keys) k = rng();
  ASSERT_TRUE(UploadAndFinish(started.session_id(), keys).ok());
  // Parts of 2 blocks' raw bytes: blocks 1-2, then 3 (short); each smaller.
  std::vector<Part> parts;
  ASSERT_TRUE(Download(started.session_id(), v1::SESSION_ARRAY_KEYS, blocks::kBlockKeys, &parts,
                       2 * blocks::kBlockKeys * 4)
                  .ok());
  ASSERT_EQ(parts.size(), 2u);
  std::vector<uint32_t> want = keys;
  std::sort(want.begin(), want.end());
  uint64_t at = blocks::kBlockKeys;
  for (const Part& p : parts) {
    EXPECT_EQ(p.header.encoding, v1::PART_ENCODING_DELTA_BLOCKS);
    EXPECT_EQ(p.header.offset, at);
    EXPECT_LT(p.body.size(), p.header.elements * 4 * 7 / 10);  // gaps of ~2^14: ~2.3 bytes
    std::vector<uint32_t> got(p.header.elements);
    absl::Status decoded = blocks::DecodeBlocks(p.body.data(), p.body.size(), blocks::KeyCoding{},
                                                at / blocks::kBlockKeys, got.size(), got.data());
    ASSERT_TRUE(decoded.ok()) << decoded;
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + at));
    at += p.header.elements;
  }
  EXPECT_EQ(at, n);
  // An offset inside a block is refused, naming the block size.
  parts.clear();
  grpc::Status unaligned = Download(started.session_id(), v1::SESSION_ARRAY_KEYS, 100, &parts);
  EXPECT_EQ(unaligned.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unaligned.error_message().find("offset: 100 is not a multiple of 65536 keys"),
            std::string::npos)
      << unaligned.error_message();
}

TEST_F(DeltaProtocolTest, UnknownEncodingsAreRefusedAndTablesGetRawParts) {
  grpc::Status status;
  StartSession(10, 7, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("key_encoding: unknown value 7"), std::string::npos)
      << status.error_message();
  // A plain session that did not ask: raw.
  const v1::StartSortSessionResponse raw = StartSession(10, v1::PART_ENCODING_RAW, &status);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(raw.key_encoding(), v1::PART_ENCODING_RAW);
  // A table session that asked: answered RAW, and its column comes raw.
  const v1::StartSortSessionResponse table =
      StartSession(4, v1::PART_ENCODING_DELTA_BLOCKS, &status, /*table=*/true);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(table.key_encoding(), v1::PART_ENCODING_RAW);
  ASSERT_TRUE(UploadAndFinish(table.session_id(), {4, 1, 3, 2}, v1::SESSION_ARRAY_COLUMN).ok());
  std::vector<Part> parts;
  ASSERT_TRUE(Download(table.session_id(), v1::SESSION_ARRAY_INDICES, 0, &parts).ok());
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].header.encoding, 0);
  EXPECT_EQ(parts[0].body.size(), 4u * 8);
}

// Keys whose gaps are as wide as the keys would grow when coded: the part
// goes raw (its header says so), and the answer is the sorted keys.
TEST_F(DeltaProtocolTest, PartsThatWouldNotShrinkComeRaw) {
  const uint64_t n = 200;
  grpc::Status status;
  const v1::StartSortSessionResponse started =
      StartSession(n, v1::PART_ENCODING_DELTA_BLOCKS, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(started.key_encoding(), v1::PART_ENCODING_DELTA_BLOCKS);
  std::vector<uint32_t> keys(n);
  std::mt19937 rng(3);
  // Every gap 2^24 + 2^17: four bytes of StreamVByte each, plus the
  // control bits and the block header: more than the raw 4 bytes a key.
  for (uint32_t i = 0; i < n; ++i) keys[i] = i * ((uint32_t{1} << 24) + (uint32_t{1} << 17));
  std::shuffle(keys.begin(), keys.end(), rng);
  ASSERT_TRUE(UploadAndFinish(started.session_id(), keys).ok());
  std::vector<Part> parts;
  ASSERT_TRUE(Download(started.session_id(), v1::SESSION_ARRAY_KEYS, 0, &parts).ok());
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].header.encoding, v1::PART_ENCODING_RAW);
  ASSERT_EQ(parts[0].body.size(), n * 4);
  std::vector<uint32_t> got(n);
  std::memcpy(got.data(), parts[0].body.data(), n * 4);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(got, keys);
  // The C++ client reads such a session's raw part like any other.
  client::ClientOptions options;
  options.compress_min_bytes = 1;
  options.session_min_bytes = 1;
  auto coded_client = Connect(*server_, options);
  std::shuffle(keys.begin(), keys.end(), rng);
  absl::StatusOr<client::SortResult<uint32_t>> sorted = coded_client->Sort<uint32_t>(keys);
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(sorted->keys, keys);
}

// Under the default policy a client on this host whose keys the CPU engine
// sorts gets raw keys (coding them on the way out was measured to lose on
// loopback); the answer says so, the parts are raw and the keys sorted.
// --key_encoding=never declines everyone.
TEST_F(DeltaProtocolTest, AutoDeclinesCodingForThisHostsCpuSortsAndNeverDeclinesAll) {
  for (KeyEncodingPolicy policy : {KeyEncodingPolicy::kAuto, KeyEncodingPolicy::kNever}) {
    StartWith(policy);
    const uint64_t n = 2 * blocks::kBlockKeys;
    grpc::Status status;
    const v1::StartSortSessionResponse started =
        StartSession(n, v1::PART_ENCODING_DELTA_BLOCKS, &status);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(started.key_encoding(), v1::PART_ENCODING_RAW);
    std::vector<uint32_t> keys(n);
    std::mt19937 rng(5);
    for (uint32_t& k : keys) k = rng();
    ASSERT_TRUE(UploadAndFinish(started.session_id(), keys).ok());
    std::vector<Part> parts;
    ASSERT_TRUE(Download(started.session_id(), v1::SESSION_ARRAY_KEYS, 0, &parts).ok());
    std::vector<uint32_t> got;
    for (const Part& p : parts) {
      EXPECT_EQ(p.header.encoding, v1::PART_ENCODING_RAW);
      const auto* words = reinterpret_cast<const uint32_t*>(p.body.data());
      got.insert(got.end(), words, words + p.body.size() / 4);
    }
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(got, keys);
  }
}

TEST(KeyEncodingPolicyTest, AutoGrantsOtherHostsAndThisHostsGpuCoded32BitKeysOnly) {
  using P = KeyEncodingPolicy;
  for (size_t width : {size_t{4}, size_t{8}}) {
    for (bool gpu : {false, true}) {
      EXPECT_TRUE(GrantCodedKeys(P::kAuto, /*same_host_peer=*/false, width, gpu));
      EXPECT_EQ(GrantCodedKeys(P::kAuto, /*same_host_peer=*/true, width, gpu), gpu && width == 4)
          << "width " << width << " gpu " << gpu;
      EXPECT_TRUE(GrantCodedKeys(P::kAlways, true, width, gpu));
      EXPECT_FALSE(GrantCodedKeys(P::kNever, false, width, gpu));
      // Unsorted keys (transfer-only sessions) do not shrink: only always.
      EXPECT_FALSE(GrantCodedKeys(P::kAuto, false, width, gpu, /*transfer_only=*/true));
      EXPECT_TRUE(GrantCodedKeys(P::kAlways, true, width, gpu, /*transfer_only=*/true));
    }
  }
  EXPECT_EQ(*ParseKeyEncodingPolicy("auto"), P::kAuto);
  EXPECT_EQ(*ParseKeyEncodingPolicy("always"), P::kAlways);
  EXPECT_EQ(*ParseKeyEncodingPolicy("never"), P::kNever);
  const absl::StatusOr<P> bad = ParseKeyEncodingPolicy("sometimes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"sometimes\" (auto, always or never)"),
            std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace sortd::testing
