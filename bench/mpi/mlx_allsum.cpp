// mlx-allsum - a real MLX program (issue 18's acceptance figure): MLX's own
// mx::distributed::init() and all_sum, float32 on the CPU stream, timed with
// the method of bench/allreduce (bench_common.h): per size a warm-up round,
// then --repeats timed rounds of back-to-back all_sums after a barrier (a
// one-float all_sum), each op evaluated before the next; rank 0 prints one
// row per round: label,ranks,bytes,round,seconds-per-op. The input is not
// donated (the program keeps it), so MLX copies it into the output and
// reduces there, whatever the backend: every backend pays the same copy.
//
// Not a test and never built by the test command: bench/mpi/CMakeLists.txt
// builds it only with -DMLX_DIR=<MLX's install>/share/cmake/MLX.
// bench/mpi/mlx_ring_vs_shim.sh runs it under meshrun, MLX's ring
// (--backend ring) against libmeshrun-mpi (--backend mpi --mpi-impl meshrun).
//
//   mlx-allsum [--backend any|ring|mpi] [--sizes 1M,16M] [--repeats N] [--label NAME]
#include <mlx/mlx.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace mx = mlx::core;

namespace {

size_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  switch (end && *end ? *end : 0) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

int iters_for(size_t bytes) {
  size_t it = (size_t(16) << 20) / bytes; // 16 MiB of sums per round (bench/allreduce's rounds are 64 MiB)
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(it, 50)));
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace

int main(int argc, char** argv) {
  std::string backend = "any", label = "mlx", sizes = "1M,16M";
  int repeats = 5;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mlx-allsum: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") backend = next();
    else if (a == "--sizes") sizes = next();
    else if (a == "--repeats") repeats = std::atoi(next().c_str());
    else if (a == "--label") label = next();
    else {
      std::fprintf(stderr, "usage: mlx-allsum [--backend any|ring|mpi] [--sizes 1M,16M] [--repeats N] [--label NAME]\n");
      return 2;
    }
  }
  mx::set_default_device(mx::Device(mx::Device::cpu));
  auto g = mx::distributed::init(true, backend);
  int rank = g.rank(), n = g.size();
  if (rank == 0)
    std::fprintf(stderr, "mlx-allsum: %s: MLX %s, %d ranks, backend '%s' (MLX_HOSTFILE %s, MLX_MPI_LIBNAME %s)\n",
                 label.c_str(), mx::version(), n, backend.c_str(),
                 std::getenv("MLX_HOSTFILE") ? "set" : "unset",
                 std::getenv("MLX_MPI_LIBNAME") ? std::getenv("MLX_MPI_LIBNAME") : "unset");
  auto one = mx::ones({1}, mx::float32);
  mx::eval(one);
  auto barrier = [&]() { mx::eval(mx::distributed::all_sum(one, g)); };

  size_t pos = 0;
  int bad = 0;
  while (pos <= sizes.size()) {
    size_t comma = sizes.find(',', pos);
    std::string tok = sizes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? sizes.size() + 1 : comma + 1;
    if (tok.empty()) continue;
    size_t bytes = parse_size(tok);
    int count = static_cast<int>(bytes / 4);
    auto x = mx::full({count}, static_cast<float>(rank + 1), mx::float32);
    mx::eval(x);
    int iters = iters_for(bytes);
    mx::array y = x;
    for (int round = -1; round < repeats; round++) {
      barrier();
      double t0 = now();
      for (int i = 0; i < iters; i++) {
        y = mx::distributed::all_sum(x, g);
        mx::eval(y);
      }
      double t = (now() - t0) / iters;
      if (round >= 0 && rank == 0)
        std::printf("%s,%d,%zu,%d,%.9f\n", label.c_str(), n, bytes, round, t);
    }
    // every element is 1 + 2 + ... + n
    float want = static_cast<float>(n) * (n + 1) / 2;
    auto wrong = mx::sum(mx::astype(mx::not_equal(y, mx::array(want)), mx::int32)).item<int32_t>();
    if (wrong) {
      std::fprintf(stderr, "mlx-allsum: rank %d: %zu bytes: %d elements differ from %g\n", rank, bytes,
                   wrong, want);
      bad = 1;
    }
    std::fflush(stdout);
  }
  barrier();
  return bad;
}
