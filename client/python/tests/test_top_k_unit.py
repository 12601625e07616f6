"""sortd_client.top_k without a server: the request it serializes (parsed
back by protobuf), the answers it reads, and split_call's pieces and merge,
with a fake `one` that answers each piece by numpy's stable order.

Run from the repository root:
  PYTHONPATH=<build>/python:client/python \
      /usr/bin/python3 -m unittest discover -s client/python/tests
"""

import unittest

import numpy as np

from sortd.v1 import sort_pb2

from sortd_client import top_k


def order_of(a, largest):
    if not largest:
        return np.argsort(a, kind="stable")
    return (len(a) - 1 - np.argsort(a[::-1], kind="stable"))[::-1]


class FakeServer:
    """Answers TopKInputs as sortd would (numpy's stable order), counting
    the requests and their sizes."""

    def __init__(self):
        self.sizes = []

    def __call__(self, call, return_indices):
        request = sort_pb2.TopKRequest.FromString(call.request(return_indices, "rid"))
        self.sizes.append(request.ByteSize())
        keys = np.asarray(call.flat_keys)
        values = None if call.flat_values is None else np.asarray(call.flat_values)
        if call.rows is not None:
            lengths = [call.row_length] * call.rows
        elif call.lengths is not None:
            lengths = call.lengths.tolist()
        else:
            lengths = [len(keys)]
        local, where, start = [], [], 0
        for length in lengths:
            perm = order_of(keys[start:start + length], call.largest)[:call.k]
            local.append(perm)
            where.append(perm + start)
            start += length
        local = np.concatenate(local).astype(np.uint64)
        where = np.concatenate(where).astype(np.intp)
        shape = (call.rows, min(call.k, call.row_length)) if call.rows is not None else (-1,)
        return top_k.TopKResult(keys[where].reshape(shape), local.reshape(shape),
                                None if values is None else values[where].reshape(shape),
                                call.counts, "rid", "ENGINE_CPU")


class TopKUnitTest(unittest.TestCase):
    def test_the_request_parses_with_every_field(self):
        call = top_k.TopKInput(np.arange(6, dtype=np.int16), 4, False, np.ones(6, np.float64),
                               [2, 0, 4], "first")
        req = sort_pb2.TopKRequest.FromString(call.request(True, "id-1"))
        self.assertEqual(req.k, 4)
        self.assertEqual(req.order, sort_pb2.SORT_ORDER_ASCENDING)
        self.assertTrue(req.return_indices)
        self.assertEqual(req.request_id, "id-1")
        self.assertEqual(req.nulls, sort_pb2.NULL_PLACEMENT_FIRST)
        self.assertEqual(list(req.segment_lengths), [2, 0, 4])
        self.assertEqual(len(req.keys.int16.values), 12)
        self.assertEqual(list(req.values.float64.values), [1.0] * 6)
        rows = top_k.TopKInput(np.zeros((3, 5), np.float32), 2, True, None, None, "last")
        req = sort_pb2.TopKRequest.FromString(rows.request(False, ""))
        self.assertEqual((req.row_length, req.order, len(req.keys.float32.values)),
                         (5, sort_pb2.SORT_ORDER_DESCENDING, 15))
        np.testing.assert_array_equal(rows.counts, [2, 2, 2])

    def test_an_answer_of_the_wrong_size_is_a_protocol_error(self):
        call = top_k.TopKInput(np.arange(10, dtype=np.uint32), 3, True, None, None, "last")
        answer = sort_pb2.TopKResponse(keys=sort_pb2.TypedArray(
            uint32=sort_pb2.Uint32Array(values=[9, 8])), indices=[9, 8])
        with self.assertRaisesRegex(Exception, "keys: the server returned 2, expected 3"):
            call.result(answer.SerializeToString(), True, str)
        answer.keys.uint32.values.append(7)
        answer.indices.append(7)
        answer.engine = sort_pb2.ENGINE_CPU
        res = call.result(answer.SerializeToString(), True, lambda e: "E%d" % e)
        np.testing.assert_array_equal(res.keys, [9, 8, 7])
        self.assertEqual(res.engine, "E%d" % sort_pb2.ENGINE_CPU)

    def test_a_split_array_merges_to_the_stable_first_k(self):
        rng = np.random.default_rng(1)
        keys = rng.integers(0, 50, 100_000).astype(np.float64)  # many ties across pieces
        values = np.arange(len(keys), dtype=np.int32)
        for largest in (True, False):
            for k in (1, 30, 3000):  # 3000 keys and indices: 48 KB back
                fake = FakeServer()
                call = top_k.TopKInput(keys, k, largest, values, None, "last")
                res = top_k.split_call(call, 64 << 10, fake)
                want = order_of(keys, largest)[:k]
                np.testing.assert_array_equal(res.indices, want)
                np.testing.assert_array_equal(res.keys, keys[want])
                np.testing.assert_array_equal(res.values, values[want])
                self.assertGreater(len(fake.sizes), 10)
                self.assertLessEqual(max(fake.sizes), 64 << 10)

    def test_a_large_k_ends_in_one_merge_call(self):
        # Candidates over the piece size but within one message: one merge
        # call, not rounds of pieces that never shrink.
        keys = np.random.default_rng(3).integers(0, 1000, 300_000).astype(np.float64)
        for n, k, calls in ((100_000, 50_000, 1), (300_000, 60_000, 4)):
            fake = FakeServer()
            call = top_k.TopKInput(keys[:n], k, True, None, None, "last")
            res = top_k.split_call(call, 16 << 20, fake, piece_bytes=64 << 10)
            np.testing.assert_array_equal(res.indices, order_of(keys[:n], True)[:k])
            self.assertEqual(len(fake.sizes), calls)

    def test_no_segments_split_into_no_arrays(self):
        self.assertEqual(top_k.split_segments(np.empty(0), np.empty(0, np.uint64)), [])

    def test_split_rows_and_segments_keep_their_shapes(self):
        rng = np.random.default_rng(2)
        rows = rng.integers(0, 9, (300, 100)).astype(np.uint16)
        fake = FakeServer()
        res = top_k.split_call(top_k.TopKInput(rows, 4, True, None, None, "last"), 8 << 10, fake)
        self.assertEqual(res.keys.shape, (300, 4))
        for r in (0, 150, 299):
            np.testing.assert_array_equal(res.indices[r], order_of(rows[r], True)[:4])
        self.assertLessEqual(max(fake.sizes), 8 << 10)
        flat = rows.reshape(-1)
        lengths = [0, 1000, 3, 0, 9000, 9000, 10_997]
        fake = FakeServer()
        res = top_k.split_call(top_k.TopKInput(flat, 2, False, None, lengths, "last"), 32 << 10,
                               fake)
        np.testing.assert_array_equal(res.counts, [0, 2, 2, 0, 2, 2, 2])
        start, at = 0, 0
        for length in lengths:
            want = order_of(flat[start:start + length], False)[:2]
            np.testing.assert_array_equal(res.indices[at:at + len(want)], want)
            start, at = start + length, at + len(want)
        self.assertGreater(len(fake.sizes), 1)
        self.assertLessEqual(max(fake.sizes), 32 << 10)

    def test_split_refusals(self):
        big = np.zeros(100_000, np.float64)
        with self.assertRaisesRegex(ValueError, "more than one message"):
            top_k.split_call(top_k.TopKInput(big, 90_000, True, None, None, "last"), 64 << 10,
                             FakeServer())
        with self.assertRaisesRegex(ValueError, "one row of"):
            top_k.split_call(top_k.TopKInput(big.reshape(10, -1), 2, True, None, None, "last"),
                             64 << 10, FakeServer())
        with self.assertRaisesRegex(ValueError, "byte strings"):
            top_k.split_call(top_k.TopKInput([b"abc"] * 10, 2, True, None, None, "last"), 10,
                             FakeServer())

    def test_bad_arguments(self):
        a = np.arange(5)
        for k, err in ((0, ValueError), (-1, ValueError), (True, TypeError), (1.0, TypeError)):
            with self.assertRaises(err):
                top_k.TopKInput(a, k, True, None, None, "last")
        with self.assertRaisesRegex(ValueError, "nulls"):
            top_k.TopKInput(a, 1, True, None, None, "middle")
        with self.assertRaisesRegex(ValueError, "negative"):
            top_k.TopKInput(a, 1, True, None, [6, -1], "last")
        with self.assertRaisesRegex(ValueError, "2-D keys are cut into rows"):
            top_k.TopKInput(a.reshape(1, 5), 1, True, None, [5], "last")
        with self.assertRaisesRegex(ValueError, "values: shape"):
            top_k.TopKInput(a.reshape(1, 5), 1, True, np.zeros(5), None, "last")


if __name__ == "__main__":
    unittest.main()


class DevicePieces(unittest.TestCase):
    """Device arrays go by reference: split_call cuts only their answers,
    each piece a sub-slice of the same region (offsets in bytes)."""

    def device_call(self, rows, row_length, k, key_dtype=np.float32):
        # A host call made to look like a device one: the slices set as
        # _by_device_reference sets them (no CUDA here).
        call = top_k.TopKInput(np.empty(0, key_dtype), k, True, None, None, "last")
        call.keys_slice = sort_pb2.RegionSlice(region="gpu", offset=4096, count=rows * row_length,
                                               type=sort_pb2.ELEMENT_TYPE_FLOAT32)
        call.device = True
        call.n, call.rows, call.row_length = rows * row_length, rows, row_length
        call.counts = np.full(rows, min(k, row_length), dtype=np.uint64)
        return call

    def test_answers_over_one_message_are_cut_by_rows(self):
        call = self.device_call(rows=1000, row_length=64, k=10)
        self.assertTrue(call.on_device())
        self.assertTrue(call.by_reference(None))
        seen = []

        def one(piece, want_indices):
            seen.append(piece.keys_slice)
            request = sort_pb2.TopKRequest.FromString(piece.request(want_indices, ""))
            self.assertEqual(request.keys_region.region, "gpu")
            self.assertEqual(request.row_length, 64)
            kept = piece.kept()
            return top_k.TopKResult(np.zeros(kept, np.float32), np.zeros(kept, np.uint64), None,
                                    piece.counts, "", "ENGINE_GPU_RADIX")

        # Room for about 300 rows' answers (10 keys and indices, 12 bytes each).
        res = top_k.split_call(call, 300 * 10 * 12 + 2000, one)
        self.assertGreater(len(seen), 1)
        # The pieces tile the region's slice in order, on row boundaries.
        at = 4096
        for piece in seen:
            self.assertEqual(piece.offset, at)
            self.assertEqual(piece.count % 64, 0)
            at += piece.count * 4
        self.assertEqual(at, 4096 + 1000 * 64 * 4)
        self.assertEqual(len(res.keys), 1000 * 10)
