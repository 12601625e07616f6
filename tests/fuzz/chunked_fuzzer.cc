// Fuzzer of the SortChunked upload state machine (ChunkedUpload): any
// sequence of messages, under small limits and a small admission budget.
// Whatever arrives, each message is accepted or the upload ends with
// INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming the field or limit; accepted
// uploads stay within the announced count and the byte limit; the columns
// hold exactly the accepted chunks, in order (nothing accepted is lost);
// and admission is back to zero once the upload is gone.
//
// Input: byte 0 picks the upload limit and the admission budget; then
// records of (2-byte little-endian length, serialized SortChunkedRequest).
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "server/grpc/raw_message.h"
#include "server/runtime/admission.h"
#include "server/wire/chunked_upload.h"
#include "server/wire/typed_array.h"
#include "tests/fuzz/fuzz_oracle.h"

namespace sortd::fuzz {
namespace {

constexpr uint64_t kUploadLimits[] = {64, 4096, uint64_t{1} << 16, uint64_t{1} << 20};
constexpr uint64_t kAdmissionBytes[] = {1024, uint64_t{1} << 20, uint64_t{1} << 26};

// What an upload may be refused with.
void CheckUploadRefusal(const absl::Status& status, absl::string_view step) {
  CheckRefusal(status, step,
               {absl::StatusCode::kInvalidArgument, absl::StatusCode::kResourceExhausted});
}

// The column holds `expected` (same type and elements, bit for bit).
void CheckHolds(const HostColumn& column, const v1::TypedArray& expected, absl::string_view what) {
  Check(column.size() == LengthOf(expected), std::string(what) + ": length differs");
  if (column.size() == 0) return;
  v1::TypedArray held;
  column.CopySlice(0, column.size(), &held);
  Check(held.SerializeAsString() == expected.SerializeAsString(),
        std::string(what) + ": holds other elements than the accepted chunks");
}

void RunUpload(const uint8_t* data, size_t size, uint64_t limit, AdmissionControl* admission) {
  ChunkedUpload upload(limit, admission);
  v1::TypedArray accepted_keys;
  v1::TypedArray accepted_values;
  uint64_t messages = 0;
  while (size >= 2) {
    const size_t length = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 2);
    grpc::Slice slice(data + 2, length);
    grpc::ByteBuffer bytes(&slice, 1);
    data += 2 + length;
    size -= 2 + length;
    v1::SortChunkedRequest message;
    const absl::Status parsed = ParseRawMessage(&bytes, &message, "SortChunked message");
    if (!parsed.ok()) {
      CheckUploadRefusal(parsed, "ParseRawMessage");
      return;
    }
    ++messages;
    const bool is_chunk = upload.has_header();
    const absl::Status status = upload.Accept(message);
    if (!status.ok()) {
      CheckUploadRefusal(status, "Accept");
      return;
    }
    if (is_chunk) {
      const v1::ArrayChunk& chunk = message.chunk();
      AppendSlice(chunk.keys(), 0, LengthOf(chunk.keys()), &accepted_keys);
      if (upload.header().with_values()) {
        AppendSlice(chunk.values(), 0, LengthOf(chunk.values()), &accepted_values);
      }
    }
    const uint64_t total = upload.header().total_keys();
    Check(total == 0 || upload.keys().size() <= total, "more keys held than announced");
    // Counted from what was accepted, not from the upload's own counter.
    Check(PayloadBytes(accepted_keys) + PayloadBytes(accepted_values) <= limit,
          "accepted payload over --max_chunked_bytes");
    Check(upload.payload_bytes() == PayloadBytes(accepted_keys) + PayloadBytes(accepted_values),
          "the upload's payload count differs from what it accepted");
    Check(admission->inflight_bytes() <= admission->max_bytes(), "admission over its budget");
    if (upload.header().with_values()) {
      Check(upload.values().size() == upload.keys().size(), "values and keys differ in length");
    }
  }
  const absl::Status finished = upload.Finish();
  if (!finished.ok()) {
    CheckUploadRefusal(finished, "Finish");
    return;
  }
  const uint64_t total = upload.header().total_keys();
  Check(total == 0 || upload.keys().size() == total, "finished short of the announcement");
  CheckHolds(upload.keys(), accepted_keys, "keys column");
  if (upload.header().with_values()) CheckHolds(upload.values(), accepted_values, "values column");
}

}  // namespace
}  // namespace sortd::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  grpc_init();  // ByteBuffer and Slice need the library initialised
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sortd::fuzz;
  if (size < 1) return 0;
  const uint64_t limit = kUploadLimits[data[0] % 4];
  sortd::AdmissionControl admission(kAdmissionBytes[(data[0] / 4) % 3], 4);
  RunUpload(data + 1, size - 1, limit, &admission);
  Check(admission.inflight_bytes() == 0, "admitted bytes not released after the upload");
  Check(admission.inflight_requests() == 0, "admitted request not released after the upload");
  return 0;
}
