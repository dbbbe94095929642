// bench-ar-mlxmpi - MLX's mpi backend as a peer of the all-reduce bench: the
// library named by MLX_MPI_LIBNAME (default libmpi.so, as MLX) is opened with
// dlopen, its version must mention "Open MPI", and the symbols are resolved by
// name as mlx/distributed/mpi/mpi.cpp does; then MPI_Allreduce(MPI_IN_PLACE,
// float, MPI_SUM) is timed with the method and rows of the C peers
// (bench_common.h: a warm-up round, `repeats` timed rounds of
// bench_round_iters() operations after a barrier, rank 0 prints
// impl,ranks,bytes,round,seconds; a final checked sum of rank+1). MLX's subset
// has no MPI_Barrier: the barrier is a one-float MPI_Allreduce, for every
// library alike.
//
// The same program gives two rows in run.sh: through libmeshrun-mpi (ranks
// started as for `ours`, MLX_MPI_LIBNAME = the shim: libmeshrun's ring) and
// through Open MPI's libmpi (ranks started by mpirun).
//
//   bench-ar-mlxmpi [--sizes LIST] [--repeats N] [--label NAME]
#include <dlfcn.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

typedef void* MPI_Comm;
typedef void* MPI_Datatype;
typedef void* MPI_Op;
#define MPI_IN_PLACE ((void*)1)

struct Mpi {
  void* lib = nullptr;
  int (*get_version)(char*, int*);
  int (*init)(int*, char***);
  int (*finalize)();
  int (*rank)(MPI_Comm, int*);
  int (*size)(MPI_Comm, int*);
  int (*all_reduce)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
  MPI_Comm world;
  MPI_Op sum;
  MPI_Datatype f32;
  std::string version, why;

  bool load() {
    const char* name = std::getenv("MLX_MPI_LIBNAME");
    if (!name)
      name = "libmpi.so";
    lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      why = dlerror();
      return false;
    }
#define LOAD(sym, var)                                   \
  do {                                                   \
    var = (decltype(var))dlsym(lib, #sym);               \
    if (dlerror() != nullptr) {                          \
      why = std::string(name) + " has no " #sym;         \
      return false;                                      \
    }                                                    \
  } while (0)
    LOAD(MPI_Get_library_version, get_version);
    char v[256];
    int len = 0;
    get_version(v, &len);
    version.assign(v, len > 0 && len < 256 ? len : 0);
    if (version.find("Open MPI") == std::string::npos) {
      why = std::string(name) + " is not Open MPI: " + version;
      return false;
    }
    LOAD(MPI_Init, init);
    LOAD(MPI_Finalize, finalize);
    LOAD(MPI_Comm_rank, rank);
    LOAD(MPI_Comm_size, size);
    LOAD(MPI_Allreduce, all_reduce);
    LOAD(ompi_mpi_comm_world, world);
    LOAD(ompi_mpi_op_sum, sum);
    LOAD(ompi_mpi_float, f32);
#undef LOAD
    return true;
  }
} mpi;

double now() {
  using clk = std::chrono::steady_clock;
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

// Same as bench_round_iters() in bench_common.c (BENCH_ROUND_BYTES, 64 MiB;
// the warm-up round, -1, at least BENCH_WARMUP_OPS, 6).
int iters_for(size_t bytes, int round) {
  size_t it = (size_t(64) << 20) / bytes;
  it = it < 1 ? 1 : it > 50 ? 50 : it;
  return int(round < 0 && it < 6 ? 6 : it);
}

bool parse_sizes(const char* list, std::vector<size_t>* out) {
  std::string s(list);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    std::string item = s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    char* e = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(item.c_str(), &e, 10);
    std::string suf(e);
    unsigned long long mul = suf == "K" ? 1ull << 10 : suf == "M" ? 1ull << 20 : suf == "G" ? 1ull << 30 : 1;
    if (errno || item.empty() || e == item.c_str() || (!suf.empty() && mul == 1) || v == 0 ||
        (v * mul) % 4 || v * mul > (1ull << 31))
      return false;
    out->push_back(size_t(v * mul));
    if (end == std::string::npos)
      break;
    pos = end + 1;
  }
  return !out->empty();
}

int barrier() {
  float x = 0;
  return mpi.all_reduce(MPI_IN_PLACE, &x, 1, mpi.f32, mpi.sum, mpi.world);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  const char* size_list = "4K,16K,64K,256K,1M,4M,16M,64M,128M";
  const char* label = nullptr;
  int repeats = 5;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: bench-ar-mlxmpi [--sizes LIST] [--repeats N] [--label NAME]\n");
      return 2;
    }
    if (a == "--sizes")
      size_list = argv[++i];
    else if (a == "--repeats")
      repeats = std::atoi(argv[++i]);
    else if (a == "--label")
      label = argv[++i];
    else {
      std::fprintf(stderr, "bench-ar-mlxmpi: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (!parse_sizes(size_list, &sizes) || repeats < 1 || repeats > 1000) {
    std::fprintf(stderr, "bench-ar-mlxmpi: bad --sizes or --repeats\n");
    return 2;
  }
  if (!mpi.load()) {
    std::fprintf(stderr, "bench-ar-mlxmpi: %s\n", mpi.why.c_str());
    return 1;
  }
  if (mpi.init(nullptr, nullptr) != 0) {
    std::fprintf(stderr, "bench-ar-mlxmpi: MPI_Init failed\n");
    return 1;
  }
  int rank = 0, n = 1;
  mpi.rank(mpi.world, &rank);
  mpi.size(mpi.world, &n);
  std::string impl = label ? label
                     : mpi.version.find("libmeshrun-mpi") != std::string::npos ? "mlx-shim"
                                                                                 : "mlx-openmpi";
  if (rank == 0) { // which MPI, and for the shim which libmeshrun backend (known after MPI_Init), ran
    char v[256];
    int len = 0;
    mpi.get_version(v, &len);
    std::fprintf(stderr, "bench-ar-mlxmpi: %s: %.*s\n", impl.c_str(), len > 0 && len < 256 ? len : 0, v);
  }
  size_t maxb = 0;
  for (size_t b : sizes)
    maxb = b > maxb ? b : maxb;
  std::vector<float> buf(maxb / 4);
  int rc = 0;
  for (size_t bytes : sizes) {
    const int count = int(bytes / 4);
    std::memset(buf.data(), 0, bytes);
    for (int round = -1; round < repeats && rc == 0; round++) {
      const int iters = iters_for(bytes, round);
      if (barrier() != 0) {
        rc = 1;
        break;
      }
      double t0 = now();
      for (int i = 0; i < iters && rc == 0; i++)
        rc = mpi.all_reduce(MPI_IN_PLACE, buf.data(), count, mpi.f32, mpi.sum, mpi.world) != 0;
      double dt = (now() - t0) / iters;
      if (rank == 0 && round >= 0) {
        std::printf("%s,%d,%zu,%d,%.9f\n", impl.c_str(), n, bytes, round, dt);
        std::fflush(stdout);
      }
    }
    if (rc)
      break;
    for (int i = 0; i < count; i++)
      buf[i] = float(rank + 1);
    rc = mpi.all_reduce(MPI_IN_PLACE, buf.data(), count, mpi.f32, mpi.sum, mpi.world) != 0;
    const float want = float(n * (n + 1) / 2);
    for (int i = 0; i < count && rc == 0; i++)
      if (buf[i] != want) {
        std::fprintf(stderr, "%s: wrong sum at element %d of %d: %g, want %g\n", impl.c_str(), i, count,
                     double(buf[i]), double(want));
        rc = 1;
      }
    if (rc)
      break;
  }
  if (rc)
    std::fprintf(stderr, "bench-ar-mlxmpi: %s failed\n", impl.c_str());
  mpi.finalize();
  return rc;
}
