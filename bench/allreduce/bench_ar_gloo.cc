// bench-ar-gloo - time Gloo's AllreduceRing and AllreduceRingChunked (in
// place, float32 sum) over its TCP transport, with the same method and rows
// as the C peers (see bench_common.h: warm-up round, `repeats` timed rounds
// of bench_round_iters() operations after a barrier, rank 0 prints
// impl,ranks,bytes,round,seconds; a final checked sum of rank+1).
//
// Rendezvous through Gloo's FileStore in a directory all ranks see; the
// device listens on --addr (the rank's address on the ring link to its left
// neighbour, the same one our ring uses), so neighbour traffic crosses the
// same veth links.
//
//   bench-ar-gloo --rank R --size N --store DIR --addr IP [--sizes LIST]
//                 [--repeats N] [--algo ring|ring_chunked|both]
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char *kDefaultSizes = "4K,16K,64K,256K,1M,4M,16M,64M,128M";

double now()
{
	using clk = std::chrono::steady_clock;
	return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

// Same as bench_round_iters() in bench_common.c (BENCH_ROUND_BYTES, 64 MiB;
// the warm-up round, -1, at least BENCH_WARMUP_OPS, 6).
int iters_for(size_t bytes, int round)
{
	size_t it = (size_t(64) << 20) / bytes;
	if (it < 1)
		it = 1;
	if (it > 50)
		it = 50;
	if (round < 0 && it < 6)
		it = 6;
	return int(it);
}

bool parse_size(const std::string &s, size_t *out)
{
	char *end = nullptr;
	errno = 0;
	if (s.empty() || s[0] < '0' || s[0] > '9')
		return false;
	unsigned long long v = strtoull(s.c_str(), &end, 10);
	if (errno)
		return false;
	std::string suf(end);
	unsigned long long mul = 1;
	if (suf == "K" || suf == "KiB")
		mul = 1ull << 10;
	else if (suf == "M" || suf == "MiB")
		mul = 1ull << 20;
	else if (suf == "G" || suf == "GiB")
		mul = 1ull << 30;
	else if (!suf.empty())
		return false;
	if (v == 0 || v > (1ull << 34) / mul || (v * mul) % 4)
		return false;
	*out = size_t(v * mul);
	return true;
}

bool parse_int(const char *s, int lo, int hi, int *out)
{
	char *end = nullptr;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = int(v);
	return true;
}

int usage(const char *why)
{
	if (why)
		fprintf(stderr, "bench-ar-gloo: %s\n", why);
	fprintf(stderr, "usage: bench-ar-gloo --rank R --size N --store DIR --addr IP [--sizes LIST] [--repeats N] [--algo ring|ring_chunked|both]\n");
	return 2;
}

template <class Algo>
int run_one(const std::shared_ptr<gloo::Context> &ctx, const char *label, size_t bytes,
	    int repeats, float *buf)
{
	const int rank = ctx->rank, n = ctx->size;
	const size_t count = bytes / sizeof(float);
	gloo::BarrierAllToOne barrier(ctx);
	Algo algo(ctx, std::vector<float *>{ buf }, int(count));

	memset(buf, 0, bytes);
	for (int round = -1; round < repeats; round++) {
		const int iters = iters_for(bytes, round);
		barrier.run();
		double t0 = now();
		for (int i = 0; i < iters; i++)
			algo.run();
		double dt = (now() - t0) / iters;
		if (rank == 0 && round >= 0) {
			printf("%s,%d,%zu,%d,%.9f\n", label, n, bytes, round, dt);
			fflush(stdout);
		}
	}
	for (size_t i = 0; i < count; i++)
		buf[i] = float(rank + 1);
	algo.run();
	const float want = float(n * (n + 1) / 2);
	for (size_t i = 0; i < count; i++) {
		if (buf[i] != want) {
			fprintf(stderr, "%s: wrong sum at element %zu of %zu: %g, want %g\n", label, i,
				count, double(buf[i]), double(want));
			return 1;
		}
	}
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	int rank = -1, size = -1, repeats = 5;
	std::string store_dir, addr, algo = "both", sizes = kDefaultSizes;

	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (a == "-h" || a == "--help")
			return usage(nullptr), 0;
		if (i + 1 >= argc)
			return usage(("option '" + a + "' needs a value").c_str());
		const char *v = argv[++i];
		if (a == "--rank") {
			if (!parse_int(v, 0, 1 << 20, &rank))
				return usage("--rank: not a rank");
		} else if (a == "--size") {
			if (!parse_int(v, 1, 1 << 20, &size))
				return usage("--size: not a size");
		} else if (a == "--repeats") {
			if (!parse_int(v, 1, 1000, &repeats))
				return usage("--repeats: not in 1..1000");
		} else if (a == "--store") {
			store_dir = v;
		} else if (a == "--addr") {
			addr = v;
		} else if (a == "--sizes") {
			sizes = v;
		} else if (a == "--algo") {
			algo = v;
			if (algo != "ring" && algo != "ring_chunked" && algo != "both")
				return usage("--algo: ring, ring_chunked or both");
		} else {
			return usage(("unknown option '" + a + "'").c_str());
		}
	}
	if (rank < 0 || size < 1 || rank >= size || store_dir.empty() || addr.empty())
		return usage("--rank, --size, --store and --addr are required (rank < size)");
	std::vector<size_t> list;
	for (size_t p = 0; p <= sizes.size();) {
		size_t q = sizes.find(',', p);
		if (q == std::string::npos)
			q = sizes.size();
		size_t b;
		if (!parse_size(sizes.substr(p, q - p), &b))
			return usage(("--sizes: bad entry '" + sizes.substr(p, q - p) + "'").c_str());
		list.push_back(b);
		p = q + 1;
	}
	size_t maxb = 0;
	for (size_t b : list)
		maxb = b > maxb ? b : maxb;

	try {
		gloo::transport::tcp::attr attr(addr.c_str());
		auto dev = gloo::transport::tcp::CreateDevice(attr);
		gloo::rendezvous::FileStore store(store_dir);
		auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
		ctx->setTimeout(std::chrono::seconds(60));
		ctx->connectFullMesh(store, dev);
		std::vector<float> buf(maxb / sizeof(float));
		int rc = 0;
		for (size_t b : list) {
			if (rc == 0 && (algo == "ring" || algo == "both"))
				rc = run_one<gloo::AllreduceRing<float>>(ctx, "gloo-ring", b, repeats, buf.data());
			if (rc == 0 && (algo == "ring_chunked" || algo == "both"))
				rc = run_one<gloo::AllreduceRingChunked<float>>(ctx, "gloo-ring-chunked", b, repeats, buf.data());
		}
		return rc;
	} catch (const std::exception &e) {
		fprintf(stderr, "bench-ar-gloo: rank %d: %s\n", rank, e.what());
		return 1;
	}
}
