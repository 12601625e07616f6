// Template definitions for sortd_client.h (include that header, not this).
#ifndef SORTD_CLIENT_SORTD_CLIENT_IMPL_H_
#define SORTD_CLIENT_SORTD_CLIENT_IMPL_H_

#include <algorithm>
#include <functional>
#include <future>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"

#include "client/typed_codec.h"

namespace sortd::client {

// A sort session for numeric `keys` into `out` (indices: null or as many).
template <typename T>
SortClient::SessionSort KeysSession(absl::Span<const T> keys, T* out, uint64_t* indices,
                                    v1::SortOrder order) {
  SortClient::SessionSort sort;
  sort.key_type = ElementTypeOf<T>();
  sort.count = keys.size();
  sort.keys = keys.data();
  sort.keys_out = out;
  sort.indices_out = indices;
  sort.order = order;
  return sort;
}

template <typename T>
absl::StatusOr<SortResult<T>> SortClient::Sort(absl::Span<const T> keys,
                                               v1::SortOrder order,
                                               bool return_indices) {
  SortResult<T> result;
  if constexpr (!std::is_same_v<T, std::string>) {
    if (UsesSession(PayloadBytes(keys))) {
      result.keys.resize(keys.size());
      if (return_indices) result.indices.resize(keys.size());
      absl::StatusOr<v1::Engine> engine = SortInSession(KeysSession<T>(
          keys, result.keys.data(), return_indices ? result.indices.data() : nullptr, order));
      if (engine.ok()) {
        result.engine = *engine;
        return result;
      }
      // A server without sort sessions (older than them): SortChunked.
      if (!absl::IsUnimplemented(engine.status())) return engine.status();
      result = SortResult<T>();
    }
  }
  // The response carries the keys back plus 8 bytes per index.
  const size_t response_bytes = PayloadBytes(keys) + (return_indices ? keys.size() * 8 : 0);
  if (NeedsChunking(std::max(PayloadBytes(keys), response_bytes))) {
    absl::Status status = SortChunked<T, NoValues>(
        keys, nullptr, order, return_indices, &result.keys, nullptr,
        return_indices ? &result.indices : nullptr, &result.engine);
    if (!status.ok()) return status;
    return result;
  }
  v1::SortRequest request;
  EncodeTo(keys, request.mutable_keys());
  request.set_order(order);
  request.set_return_indices(return_indices);
  v1::SortResponse response;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  grpc::Status rpc = stub_->Sort(&ctx, request, &response);
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  result.keys.reserve(keys.size());
  absl::Status status = AppendDecoded(response.keys(), &result.keys, "keys");
  if (!status.ok()) return status;
  result.indices.assign(response.indices().begin(), response.indices().end());
  result.engine = response.engine();
  return result;
}

// Runs fn(0) .. fn(n - 1), at most `width` at once; the first error.
inline absl::Status RunPieces(size_t n, size_t width,
                              const std::function<absl::Status(size_t)>& fn) {
  absl::Status first;
  for (size_t start = 0; start < n; start += width) {
    std::vector<std::future<absl::Status>> wave;
    for (size_t i = start; i < std::min(n, start + width); ++i) {
      wave.push_back(std::async(std::launch::async, fn, i));
    }
    for (auto& f : wave) {
      absl::Status s = f.get();
      if (first.ok() && !s.ok()) first = s;
    }
    if (!first.ok()) return first;
  }
  return first;
}

template <typename T>
absl::StatusOr<TopKResult<T>> SortClient::TopK(absl::Span<const T> keys, uint64_t k,
                                               v1::SortOrder order, bool return_indices,
                                               const TopKSegments& segments) {
  if constexpr (!std::is_same_v<T, std::string>) {
    // Room for the arrays: the fields around them (request_id, at most
    // 4 KiB, included) take less than this.
    constexpr size_t kFieldsBytes = size_t{64} << 10;
    const size_t limit = static_cast<size_t>(std::max(options_.max_message_bytes, 1));
    const size_t budget = limit > 2 * kFieldsBytes ? limit - kFieldsBytes : limit / 2;
    const size_t bytes = keys.size() * sizeof(T) + 10 * segments.lengths.size();
    if (k > 0 && bytes > std::min(kTopKPieceBytes, budget)) {
      return TopKInPieces<T>(keys, k, order, return_indices, segments, budget);
    }
  }
  return TopKOne<T>(keys, k, order, return_indices, segments);
}

template <typename T>
absl::StatusOr<TopKResult<T>> SortClient::TopKInPieces(absl::Span<const T> keys, uint64_t k,
                                                       v1::SortOrder order, bool return_indices,
                                                       const TopKSegments& segments,
                                                       size_t budget) {
  constexpr size_t kInFlight = 4;
  const size_t piece_bytes = std::min(kTopKPieceBytes, budget);
  const size_t back = sizeof(T) + 8;  // answer bytes a kept key
  // Pieces of whole rows or segments: [begin, end) keys and their lengths.
  struct Piece {
    size_t begin = 0, end = 0;
    TopKSegments segments;
  };
  std::vector<Piece> pieces;
  if (segments.row_length > 0 || !segments.lengths.empty()) {
    std::vector<uint64_t> lengths = segments.lengths;
    if (segments.row_length > 0) {
      if (keys.size() % segments.row_length != 0) {
        return TopKOne<T>(keys, k, order, return_indices, segments);  // the server says why
      }
      lengths.assign(keys.size() / segments.row_length, segments.row_length);
    }
    size_t at = 0, size = 0;
    Piece piece;
    for (uint64_t length : lengths) {
      const size_t cost = std::max<size_t>(length * sizeof(T), std::min<uint64_t>(k, length) * back) + 20;
      if (cost > budget) {
        return absl::InvalidArgumentError(absl::StrCat(
            "segments: one of ", length, " keys is more than one message (", budget, " bytes)"));
      }
      if (size + cost > piece_bytes && piece.end > piece.begin) {
        pieces.push_back(piece);
        piece = Piece{at, at, {}};
        size = 0;
      }
      piece.end = at + length;
      if (segments.row_length > 0) {
        piece.segments.row_length = segments.row_length;
      } else {
        piece.segments.lengths.push_back(length);
      }
      at += length;
      size += cost;
    }
    pieces.push_back(piece);
    std::vector<TopKResult<T>> answers(pieces.size());
    absl::Status status = RunPieces(pieces.size(), kInFlight, [&](size_t i) {
      absl::StatusOr<TopKResult<T>> answer = TopKOne<T>(
          keys.subspan(pieces[i].begin, pieces[i].end - pieces[i].begin), k, order,
          return_indices, pieces[i].segments);
      if (!answer.ok()) return answer.status();
      answers[i] = *std::move(answer);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    TopKResult<T> joined;
    joined.engine = answers.front().engine;
    for (TopKResult<T>& a : answers) {
      joined.keys.insert(joined.keys.end(), a.keys.begin(), a.keys.end());
      joined.indices.insert(joined.indices.end(), a.indices.begin(), a.indices.end());
      joined.segment_counts.insert(joined.segment_counts.end(), a.segment_counts.begin(),
                                   a.segment_counts.end());
    }
    return joined;
  }
  // One array: pieces of at least 2k keys, so that every round of
  // candidates is at most half the keys before it.
  const size_t n = keys.size();
  if (std::min<uint64_t>(k, n) * back > budget) {
    return absl::InvalidArgumentError(absl::StrCat(
        "k: ", std::min<uint64_t>(k, n), " keys with their indices are more than one message (",
        budget, " bytes); ask for a smaller k, or Sort"));
  }
  const size_t step = std::min<size_t>(budget / sizeof(T),
                                       std::max<size_t>(piece_bytes / sizeof(T), 2 * k));
  if (n <= step) return TopKOne<T>(keys, k, order, return_indices, segments);
  const size_t count = (n + step - 1) / step;
  std::vector<TopKResult<T>> answers(count);
  absl::Status status = RunPieces(count, kInFlight, [&](size_t i) {
    absl::StatusOr<TopKResult<T>> answer =
        TopKOne<T>(keys.subspan(i * step, std::min(step, n - i * step)), k, order, true, {});
    if (!answer.ok()) return answer.status();
    answers[i] = *std::move(answer);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  // Candidates in piece order, each piece's in its sorted order: among
  // equal keys the stable selection keeps the earliest positions.
  std::vector<T> candidates;
  std::vector<uint64_t> positions;
  for (size_t i = 0; i < count; ++i) {
    candidates.insert(candidates.end(), answers[i].keys.begin(), answers[i].keys.end());
    for (uint64_t p : answers[i].indices) positions.push_back(i * step + p);
  }
  absl::StatusOr<TopKResult<T>> merged = TopK<T>(candidates, k, order, true, {});
  if (!merged.ok()) return merged.status();
  TopKResult<T> result;
  result.keys = std::move(merged->keys);
  result.engine = merged->engine;
  if (return_indices) {
    for (uint64_t c : merged->indices) result.indices.push_back(positions[c]);
  }
  return result;
}

template <typename T>
absl::StatusOr<TopKResult<T>> SortClient::TopKOne(absl::Span<const T> keys, uint64_t k,
                                                  v1::SortOrder order, bool return_indices,
                                                  const TopKSegments& segments) {
  v1::TopKRequest request;
  EncodeTo(keys, request.mutable_keys());
  request.set_k(k);
  request.set_order(order);
  request.set_return_indices(return_indices);
  request.set_row_length(segments.row_length);
  request.mutable_segment_lengths()->Add(segments.lengths.begin(), segments.lengths.end());
  v1::TopKResponse response;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  grpc::Status rpc = stub_->TopK(&ctx, request, &response);
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  TopKResult<T> result;
  absl::Status status = AppendDecoded(response.keys(), &result.keys, "keys");
  if (!status.ok()) return status;
  result.indices.assign(response.indices().begin(), response.indices().end());
  result.segment_counts.assign(response.segment_counts().begin(),
                               response.segment_counts().end());
  result.engine = response.engine();
  return result;
}

template <typename T>
absl::StatusOr<v1::Engine> SortClient::SortInto(absl::Span<const T> keys, absl::Span<T> out,
                                                v1::SortOrder order,
                                                absl::Span<uint64_t> indices) {
  static_assert(!std::is_same_v<T, std::string>, "SortInto takes numeric keys");
  if (out.size() != keys.size()) return absl::InvalidArgumentError("out: length does not match keys");
  if (!indices.empty() && indices.size() != keys.size()) {
    return absl::InvalidArgumentError("indices: length does not match keys");
  }
  if (UsesSession(PayloadBytes(keys))) {
    absl::StatusOr<v1::Engine> engine = SortInSession(
        KeysSession<T>(keys, out.data(), indices.empty() ? nullptr : indices.data(), order));
    // A server without sort sessions (older than them): SortChunked below.
    if (!absl::IsUnimplemented(engine.status())) return engine;
  }
  absl::StatusOr<SortResult<T>> result = Sort(keys, order, !indices.empty());
  if (!result.ok()) return result.status();
  std::copy(result->keys.begin(), result->keys.end(), out.begin());
  std::copy(result->indices.begin(), result->indices.end(), indices.begin());
  return result->engine;
}

template <typename K, typename V>
absl::StatusOr<PairsResult<K, V>> SortClient::SortPairs(absl::Span<const K> keys,
                                                        absl::Span<const V> values,
                                                        v1::SortOrder order) {
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError("values: length does not match keys");
  }
  PairsResult<K, V> result;
  if constexpr (!std::is_same_v<K, std::string> && !std::is_same_v<V, std::string>) {
    if (UsesSession(PayloadBytes(keys) + PayloadBytes(values))) {
      result.keys.resize(keys.size());
      result.values.resize(values.size());
      SessionSort sort = KeysSession<K>(keys, result.keys.data(), nullptr, order);
      sort.value_type = ElementTypeOf<V>();
      sort.values = values.data();
      sort.values_out = result.values.data();
      absl::StatusOr<v1::Engine> engine = SortInSession(sort);
      if (engine.ok()) {
        result.engine = *engine;
        return result;
      }
      if (!absl::IsUnimplemented(engine.status())) return engine.status();
      result = PairsResult<K, V>();  // a server without sessions: SortChunked
    }
  }
  if (NeedsChunking(PayloadBytes(keys) + PayloadBytes(values))) {
    absl::Status status = SortChunked<K, V>(keys, &values, order, false, &result.keys,
                                            &result.values, nullptr, &result.engine);
    if (!status.ok()) return status;
    return result;
  }
  v1::SortPairsRequest request;
  EncodeTo(keys, request.mutable_keys());
  EncodeTo(values, request.mutable_values());
  request.set_order(order);
  v1::SortPairsResponse response;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  grpc::Status rpc = stub_->SortPairs(&ctx, request, &response);
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  absl::Status status = AppendDecoded(response.keys(), &result.keys, "keys");
  if (status.ok()) status = AppendDecoded(response.values(), &result.values, "values");
  if (!status.ok()) return status;
  result.engine = response.engine();
  return result;
}

// Upload: header, then chunks of about chunk_bytes; download: chunks in
// order until the server closes the stream.
template <typename K, typename V>
absl::Status SortClient::SortChunked(absl::Span<const K> keys,
                                     const absl::Span<const V>* values,
                                     v1::SortOrder order, bool return_indices,
                                     std::vector<K>* out_keys,
                                     std::vector<V>* out_values,
                                     std::vector<uint64_t>* out_indices,
                                     v1::Engine* engine) {
  constexpr bool kPairs = !std::is_same_v<V, NoValues>;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  auto stream = stub_->SortChunked(&ctx);
  v1::SortChunkedRequest request;
  auto* header = request.mutable_header();
  header->set_order(order);
  header->set_return_indices(return_indices);
  header->set_with_values(kPairs);
  header->set_total_keys(keys.size());
  bool sending = stream->Write(request);

  const size_t n = keys.size();
  // Elements per chunk from the average payload per element.
  size_t bytes = PayloadBytes(keys);
  if constexpr (kPairs) bytes += PayloadBytes(*values);
  const size_t per_element = std::max<size_t>(1, bytes / std::max<size_t>(n, 1));
  // A chunk must fit this client's own message limit too (half of it:
  // string lengths vary around the average, and framing needs room).
  const size_t chunk_bytes =
      std::min(options_.chunk_bytes,
               std::max<size_t>(1, static_cast<size_t>(options_.max_message_bytes) / 2));
  const size_t count = std::max<size_t>(1, chunk_bytes / per_element);
  size_t begin = 0;
  while (sending && begin < n) {
    const size_t end = std::min(n, begin + count);
    request.Clear();
    auto* chunk = request.mutable_chunk();
    EncodeTo(keys.subspan(begin, end - begin), chunk->mutable_keys());
    if constexpr (kPairs) EncodeTo(values->subspan(begin, end - begin), chunk->mutable_values());
    sending = stream->Write(request);
    begin = end;
  }
  if (sending) stream->WritesDone();

  out_keys->clear();
  out_keys->reserve(n);
  if constexpr (kPairs) {
    out_values->clear();
    out_values->reserve(n);
  }
  if (out_indices != nullptr) {
    out_indices->clear();
    out_indices->reserve(n);
  }
  v1::SortChunkedResponse response;
  absl::Status decoded;
  while (stream->Read(&response)) {
    if (response.request_id().size() > 0 || response.engine() != v1::ENGINE_UNSPECIFIED) {
      *engine = response.engine();
    }
    if (!decoded.ok()) continue;
    decoded = AppendDecoded(response.chunk().keys(), out_keys, "chunk.keys");
    if constexpr (kPairs) {
      if (decoded.ok()) decoded = AppendDecoded(response.chunk().values(), out_values, "chunk.values");
    }
    if (out_indices != nullptr) {
      out_indices->insert(out_indices->end(), response.indices().begin(),
                          response.indices().end());
    }
  }
  grpc::Status rpc = stream->Finish();
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  if (!decoded.ok()) return decoded;
  if (out_keys->size() != n) {
    return absl::DataLossError(absl::StrCat("SortChunked returned ", out_keys->size(),
                                            " keys, expected ", n));
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<v1::Engine> SortClient::SortInRegion(const SharedRegion& region, absl::Span<T> keys,
                                                    v1::SortOrder order) {
  RegionSort sort;
  absl::StatusOr<RegionRef> ref = region.Ref(keys.data(), keys.size(), ElementTypeOf<T>());
  if (!ref.ok()) return ref.status();
  sort.keys = *std::move(ref);
  sort.order = order;
  return SortRegion(sort);
}

template <typename K, typename V>
absl::StatusOr<v1::Engine> SortClient::SortPairsInRegion(const SharedRegion& region,
                                                         absl::Span<K> keys, absl::Span<V> values,
                                                         v1::SortOrder order) {
  RegionSort sort;
  absl::StatusOr<RegionRef> ref = region.Ref(keys.data(), keys.size(), ElementTypeOf<K>());
  if (!ref.ok()) return ref.status();
  sort.keys = *std::move(ref);
  ref = region.Ref(values.data(), values.size(), ElementTypeOf<V>());
  if (!ref.ok()) return ref.status();
  sort.values = *std::move(ref);
  sort.order = order;
  return SortRegion(sort);
}

}  // namespace sortd::client

#endif  // SORTD_CLIENT_SORTD_CLIENT_IMPL_H_
