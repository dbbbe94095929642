// mlx_mpi_test.cpp - MLX's mpi backend (mlx/distributed/mpi/mpi.cpp), reduced to
// its calls: the library named by MLX_MPI_LIBNAME is opened with dlopen, its
// version must mention "Open MPI", every symbol MLX resolves is resolved by
// name the way MLX does (dlsym + dlerror), float16/bfloat16 are 2-byte
// contiguous types with user ops made by MPI_Op_create, complex64 max/min are
// user ops too. It then runs what MLX's group does: all_sum/max/min on every
// MLX dtype (in place and not), all_gather, send/recv between every pair of
// ranks and a split, and checks every element.
//
//   mpishim-mlx-test [--sizes N,N,...]     the checks above; exit 0 when all pass
//   mpishim-mlx-test --fault-loop          all_sum of 16 MiB until one fails:
//                                          print the error and the seconds, exit 3
//   mpishim-mlx-test --bench SIZE ITERS    all_sum float32 timing (bench/allreduce)
// Options:
//   --fault-size BYTES   the --fault-loop's all_sum size (default 16 MiB; the
//                        soft-RoCE guest, emulated, uses less)
//   --ignore-sigterm     for fault tests under meshrun, which stops the other
//                        ranks at the first failure: they still print theirs
//   --split-size N       elements of the split's all_sum (default 70000)
//   --neighbours-only    a ring whose ranks reach their two neighbours only
//                        (jaccl-ring): send/recv between neighbours, and the
//                        reordered split pairs neighbours (0,1), (2,3), ...
//
// Output: "mlx-mpi-test: rank R of N: ok (...)" per rank on success.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

// mpi_declarations.h of MLX, as it is
#define MPI_SUCCESS 0
#define MPI_ANY_SOURCE -1
#define MPI_ANY_TAG -1
#define MPI_IN_PLACE ((void*)1)
#define MPI_MAX_LIBRARY_VERSION_STRING 256
typedef void* MPI_Comm;
typedef void* MPI_Datatype;
typedef void* MPI_Op;
typedef void(MPI_User_function)(void*, void*, int*, MPI_Datatype*);
typedef struct ompi_status_public_t {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int _cancelled;
  size_t _ucount;
} MPI_Status;

namespace {

int fails = 0;
int rank_ = -1;

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      std::fprintf(stderr, "rank %d: FAIL: ", rank_);     \
      std::fprintf(stderr, __VA_ARGS__);                  \
      std::fprintf(stderr, "\n");                         \
      if (++fails > 20)                                   \
        std::exit(1);                                     \
    }                                                     \
  } while (0)

// MLX's float16_t and bfloat16_t where the compiler has no native type: the
// arithmetic in float, rounded to nearest even on the way back.
uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = (u >> 16) & 0x8000u;
  int e = (int)((u >> 23) & 0xff) - 127 + 15;
  uint32_t man = u & 0x7fffffu;
  if (((u >> 23) & 0xff) == 0xff)
    return sign | 0x7c00u | (man ? 0x200u : 0);
  if (e >= 0x1f)
    return sign | 0x7c00u;
  if (e <= 0) {
    if (e < -10)
      return sign;
    uint32_t full = man | 0x800000u;
    unsigned shift = (unsigned)(14 - e);
    uint32_t m = full >> shift, rem = full & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1)))
      m++;
    return sign | m;
  }
  uint32_t m = man >> 13, rem = man & 0x1fffu, r = ((uint32_t)e << 10) | m;
  if (rem > 0x1000u || (rem == 0x1000u && (m & 1)))
    r++;
  return sign | r;
}
float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0x1f)
    u = sign | 0x7f800000u | (man << 13);
  else if (exp == 0) {
    float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
  } else
    u = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}
float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct float16_t {
  uint16_t bits;
  float16_t() = default;
  explicit float16_t(float f) : bits(f32_to_f16(f)) {}
  operator float() const { return f16_to_f32(bits); }
  float16_t& operator+=(float16_t o) { return *this = float16_t(float(*this) + float(o)); }
  bool operator<(float16_t o) const { return float(*this) < float(o); }
  bool operator==(float16_t o) const { return bits == o.bits; }
};
struct bfloat16_t {
  uint16_t bits;
  bfloat16_t() = default;
  explicit bfloat16_t(float f) : bits(f32_to_bf16(f)) {}
  operator float() const { return bf16_to_f32(bits); }
  bfloat16_t& operator+=(bfloat16_t o) { return *this = bfloat16_t(float(*this) + float(o)); }
  bool operator<(bfloat16_t o) const { return float(*this) < float(o); }
  bool operator==(bfloat16_t o) const { return bits == o.bits; }
};
// MLX's complex64_t compares by real part, then imaginary part
struct complex64_t {
  float re, im;
  complex64_t() = default;
  complex64_t(float r, float i) : re(r), im(i) {}
  complex64_t& operator+=(complex64_t o) { re += o.re; im += o.im; return *this; }
  bool operator<(complex64_t o) const { return re < o.re || (re == o.re && im < o.im); }
  bool operator==(complex64_t o) const { return re == o.re && im == o.im; }
};

// MLX's user functions, as they are
template <typename T>
void simple_sum(void* input, void* accumulator, int* len, MPI_Datatype*) {
  T* in = (T*)input;
  T* acc = (T*)accumulator;
  int N = *len;
  while (N-- > 0) {
    *acc += *in;
    acc++;
    in++;
  }
}
template <typename T>
void simple_max(void* input, void* accumulator, int* len, MPI_Datatype*) {
  T* in = (T*)input;
  T* acc = (T*)accumulator;
  int N = *len;
  while (N-- > 0) {
    *acc = std::max(*acc, *in);
    acc++;
    in++;
  }
}
template <typename T>
void simple_min(void* input, void* accumulator, int* len, MPI_Datatype*) {
  T* in = (T*)input;
  T* acc = (T*)accumulator;
  int N = *len;
  while (N-- > 0) {
    *acc = std::min(*acc, *in);
    acc++;
    in++;
  }
}

// A user op the shim cannot recognise: int16 sum saturating at +-1000, on a
// 2-byte contiguous type, so the generic path (call the function) is tested.
void sat_sum(void* input, void* accumulator, int* len, MPI_Datatype*) {
  int16_t* in = (int16_t*)input;
  int16_t* acc = (int16_t*)accumulator;
  for (int i = 0; i < *len; i++)
    acc[i] = (int16_t)std::max(-1000, std::min(1000, acc[i] + in[i]));
}

struct MPIWrapper {
  void* libmpi_handle_ = nullptr;
  int (*init)(int*, char***);
  int (*finalize)();
  int (*rank)(MPI_Comm, int*);
  int (*size)(MPI_Comm, int*);
  int (*all_reduce)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
  int (*all_gather)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
  int (*comm_split)(MPI_Comm, int, int, MPI_Comm*);
  int (*comm_free)(MPI_Comm*);
  int (*send)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
  int (*recv)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status*);
  int (*mpi_type_contiguous)(int, MPI_Datatype, MPI_Datatype*);
  int (*mpi_type_commit)(MPI_Datatype*);
  int (*mpi_op_create)(MPI_User_function*, int, MPI_Op*);
  MPI_Comm comm_world_;
  MPI_Op op_sum_, op_max_, op_min_;
  MPI_Op op_sum_f16_, op_sum_bf16_, op_max_f16_, op_max_bf16_, op_max_c64_;
  MPI_Op op_min_f16_, op_min_bf16_, op_min_c64_, op_sat_;
  MPI_Datatype mpi_bool_, mpi_int8_, mpi_uint8_, mpi_int16_, mpi_uint16_, mpi_int32_,
      mpi_uint32_, mpi_int64_, mpi_uint64_, mpi_float_, mpi_double_, mpi_complex_,
      mpi_float16_, mpi_bfloat16_, mpi_sat_;
  int (*get_version)(char*, int*);
  std::string version;
  std::string missing;

  // after MPI_Init the shim's string also names libmeshrun's backend
  void reread_version() {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    get_version(v, &len);
    version.assign(v, len);
  }

  bool load() {
    const char* name = std::getenv("MLX_MPI_LIBNAME");
    if (!name) {
      missing = "MLX_MPI_LIBNAME is not set";
      return false;
    }
    libmpi_handle_ = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (!libmpi_handle_) {
      missing = dlerror();
      return false;
    }
#define LOAD_SYMBOL(symbol, variable)                              \
  {                                                                \
    variable = (decltype(variable))dlsym(libmpi_handle_, #symbol); \
    char* error = dlerror();                                       \
    if (error != nullptr) {                                        \
      missing = #symbol;                                           \
      return false;                                                \
    }                                                              \
  }
    LOAD_SYMBOL(MPI_Get_library_version, get_version);
    char version_ptr[MPI_MAX_LIBRARY_VERSION_STRING];
    int version_length = 0;
    get_version(version_ptr, &version_length);
    version.assign(version_ptr, version_length);
    if (std::string_view(version).find("Open MPI") == std::string::npos) {
      missing = "'Open MPI' in the version string: " + version;
      return false;
    }
    LOAD_SYMBOL(MPI_Init, init);
    LOAD_SYMBOL(MPI_Finalize, finalize);
    LOAD_SYMBOL(MPI_Comm_rank, rank);
    LOAD_SYMBOL(MPI_Comm_size, size);
    LOAD_SYMBOL(MPI_Comm_split, comm_split);
    LOAD_SYMBOL(MPI_Comm_free, comm_free);
    LOAD_SYMBOL(MPI_Allreduce, all_reduce);
    LOAD_SYMBOL(MPI_Allgather, all_gather);
    LOAD_SYMBOL(MPI_Send, send);
    LOAD_SYMBOL(MPI_Recv, recv);
    LOAD_SYMBOL(MPI_Type_contiguous, mpi_type_contiguous);
    LOAD_SYMBOL(MPI_Type_commit, mpi_type_commit);
    LOAD_SYMBOL(MPI_Op_create, mpi_op_create);
    LOAD_SYMBOL(ompi_mpi_comm_world, comm_world_);
    LOAD_SYMBOL(ompi_mpi_op_sum, op_sum_);
    LOAD_SYMBOL(ompi_mpi_op_max, op_max_);
    LOAD_SYMBOL(ompi_mpi_op_min, op_min_);
    LOAD_SYMBOL(ompi_mpi_c_bool, mpi_bool_);
    LOAD_SYMBOL(ompi_mpi_int8_t, mpi_int8_);
    LOAD_SYMBOL(ompi_mpi_uint8_t, mpi_uint8_);
    LOAD_SYMBOL(ompi_mpi_int16_t, mpi_int16_);
    LOAD_SYMBOL(ompi_mpi_uint16_t, mpi_uint16_);
    LOAD_SYMBOL(ompi_mpi_int32_t, mpi_int32_);
    LOAD_SYMBOL(ompi_mpi_uint32_t, mpi_uint32_);
    LOAD_SYMBOL(ompi_mpi_int64_t, mpi_int64_);
    LOAD_SYMBOL(ompi_mpi_uint64_t, mpi_uint64_);
    LOAD_SYMBOL(ompi_mpi_float, mpi_float_);
    LOAD_SYMBOL(ompi_mpi_double, mpi_double_);
    LOAD_SYMBOL(ompi_mpi_c_complex, mpi_complex_);
#undef LOAD_SYMBOL
    return true;
  }

  // MLX's init_safe
  bool init_safe() {
    if (init(nullptr, nullptr) != MPI_SUCCESS)
      return false;
    mpi_type_contiguous(2, mpi_uint8_, &mpi_float16_);
    mpi_type_commit(&mpi_float16_);
    mpi_type_contiguous(2, mpi_uint8_, &mpi_bfloat16_);
    mpi_type_commit(&mpi_bfloat16_);
    mpi_op_create(&simple_sum<float16_t>, 1, &op_sum_f16_);
    mpi_op_create(&simple_sum<bfloat16_t>, 1, &op_sum_bf16_);
    mpi_op_create(&simple_max<float16_t>, 1, &op_max_f16_);
    mpi_op_create(&simple_max<bfloat16_t>, 1, &op_max_bf16_);
    mpi_op_create(&simple_max<complex64_t>, 1, &op_max_c64_);
    mpi_op_create(&simple_min<float16_t>, 1, &op_min_f16_);
    mpi_op_create(&simple_min<bfloat16_t>, 1, &op_min_bf16_);
    mpi_op_create(&simple_min<complex64_t>, 1, &op_min_c64_);
    // ours: the generic path
    mpi_type_contiguous(1, mpi_int16_, &mpi_sat_);
    mpi_type_commit(&mpi_sat_);
    mpi_op_create(&sat_sum, 1, &op_sat_);
    return true;
  }
} mpi;

enum Op { SUM, MAX, MIN };
const char* op_name[] = {"all_sum", "all_max", "all_min"};

// rank r's element i: small integers, exact in every dtype (bf16 too)
double value(int r, size_t i) {
  return (double)((int)((r * 7 + i * 3) % 11) - 4);
}

template <typename T> T make(double v);
template <> bool make<bool>(double v) { return v > 2; }
template <> int8_t make<int8_t>(double v) { return (int8_t)v; }
template <> uint8_t make<uint8_t>(double v) { return (uint8_t)(v + 4); }
template <> int16_t make<int16_t>(double v) { return (int16_t)(v * 100); }
template <> uint16_t make<uint16_t>(double v) { return (uint16_t)(v + 4); }
template <> int32_t make<int32_t>(double v) { return (int32_t)v * 1000; }
template <> uint32_t make<uint32_t>(double v) { return (uint32_t)(v + 4); }
template <> int64_t make<int64_t>(double v) { return (int64_t)v * (int64_t(1) << 33); }
template <> uint64_t make<uint64_t>(double v) { return (uint64_t)(v + 4) << 33; }
template <> float make<float>(double v) { return (float)v * 0.5f; }
template <> double make<double>(double v) { return v * 0.25; }
template <> float16_t make<float16_t>(double v) { return float16_t((float)v); }
template <> bfloat16_t make<bfloat16_t>(double v) { return bfloat16_t((float)v); }
template <> complex64_t make<complex64_t>(double v) { return complex64_t((float)v, (float)(v * v)); }

template <typename T> bool same(T a, T b) { return a == b; }

template <typename T> T combine(Op op, T a, T b) {
  if (op == SUM) {
    if constexpr (std::is_same_v<T, bool>)
      return a || b;
    else {
      T x = a;
      x += b;
      return x;
    }
  }
  return op == MAX ? std::max(a, b) : std::min(a, b);
}

template <typename T>
void check_reduce(const char* dname, MPI_Datatype dt, MPI_Op ops[3], int size, size_t n) {
  for (int op = 0; op < 3; op++) {
    for (int inplace = 0; inplace < 2; inplace++) {
      // not std::vector: vector<bool> has no data()
      std::unique_ptr<T[]> in(new T[n]), out(new T[n]);
      for (size_t i = 0; i < n; i++)
        in[i] = make<T>(value(rank_, i));
      if (inplace)
        std::copy(in.get(), in.get() + n, out.get());
      int rc = mpi.all_reduce(inplace ? MPI_IN_PLACE : in.get(), out.get(), (int)n, dt,
                              ops[op], mpi.comm_world_);
      CHECK(rc == MPI_SUCCESS, "%s %s n=%zu: MPI_Allreduce returned %d", op_name[op], dname, n, rc);
      for (size_t i = 0; i < n; i++) {
        T want = make<T>(value(size - 1, i));
        for (int r = size - 2; r >= 0; r--)
          want = combine<T>((Op)op, make<T>(value(r, i)), want);
        if (!same(out[i], want)) {
          CHECK(false, "%s %s n=%zu %s: element %zu differs", op_name[op], dname, n,
                inplace ? "in place" : "out of place", i);
          break;
        }
      }
    }
  }
}

void check_all(int size, const std::vector<size_t>& sizes) {
  MPI_Op std_ops[3] = {mpi.op_sum_, mpi.op_max_, mpi.op_min_};
  MPI_Op f16_ops[3] = {mpi.op_sum_f16_, mpi.op_max_f16_, mpi.op_min_f16_};
  MPI_Op bf16_ops[3] = {mpi.op_sum_bf16_, mpi.op_max_bf16_, mpi.op_min_bf16_};
  MPI_Op c64_ops[3] = {mpi.op_sum_, mpi.op_max_c64_, mpi.op_min_c64_}; // as MLX's op_sum/max/min
  for (size_t n : sizes) {
    check_reduce<bool>("bool", mpi.mpi_bool_, std_ops, size, n);
    check_reduce<int8_t>("int8", mpi.mpi_int8_, std_ops, size, n);
    check_reduce<uint8_t>("uint8", mpi.mpi_uint8_, std_ops, size, n);
    check_reduce<int16_t>("int16", mpi.mpi_int16_, std_ops, size, n);
    check_reduce<uint16_t>("uint16", mpi.mpi_uint16_, std_ops, size, n);
    check_reduce<int32_t>("int32", mpi.mpi_int32_, std_ops, size, n);
    check_reduce<uint32_t>("uint32", mpi.mpi_uint32_, std_ops, size, n);
    check_reduce<int64_t>("int64", mpi.mpi_int64_, std_ops, size, n);
    check_reduce<uint64_t>("uint64", mpi.mpi_uint64_, std_ops, size, n);
    check_reduce<float>("float32", mpi.mpi_float_, std_ops, size, n);
    check_reduce<double>("float64", mpi.mpi_double_, std_ops, size, n);
    check_reduce<float16_t>("float16", mpi.mpi_float16_, f16_ops, size, n);
    check_reduce<bfloat16_t>("bfloat16", mpi.mpi_bfloat16_, bf16_ops, size, n);
    check_reduce<complex64_t>("complex64", mpi.mpi_complex_, c64_ops, size, n);

    // the generic path: a user op the shim does not know
    std::vector<int16_t> a(n);
    for (size_t i = 0; i < n; i++)
      a[i] = (int16_t)(400 + rank_ * 300 - (int)(i % 5) * 200);
    int rc = mpi.all_reduce(MPI_IN_PLACE, a.data(), (int)n, mpi.mpi_sat_, mpi.op_sat_, mpi.comm_world_);
    CHECK(rc == MPI_SUCCESS, "saturating sum n=%zu: MPI_Allreduce returned %d", n, rc);
    for (size_t i = 0; i < n; i++) {
      int want = 400 + (size - 1) * 300 - (int)(i % 5) * 200;
      for (int r = size - 2; r >= 0; r--)
        want = std::max(-1000, std::min(1000, 400 + r * 300 - (int)(i % 5) * 200 + want));
      if (a[i] != want) {
        CHECK(false, "saturating sum n=%zu: element %zu is %d, want %d", n, i, a[i], want);
        break;
      }
    }

    // all_gather, as MLX calls it
    std::vector<float> g(n), all(n * size);
    for (size_t i = 0; i < n; i++)
      g[i] = (float)value(rank_, i);
    rc = mpi.all_gather(g.data(), (int)n, mpi.mpi_float_, all.data(), (int)n, mpi.mpi_float_, mpi.comm_world_);
    CHECK(rc == MPI_SUCCESS, "all_gather n=%zu: MPI_Allgather returned %d", n, rc);
    for (int r = 0; r < size; r++)
      for (size_t i = 0; i < n; i++)
        if (all[r * n + i] != (float)value(r, i)) {
          CHECK(false, "all_gather n=%zu: rank %d's element %zu differs", n, r, i);
          r = size;
          break;
        }
    std::vector<uint16_t> h(n), hall(n * size);
    for (size_t i = 0; i < n; i++)
      h[i] = float16_t((float)value(rank_, i)).bits;
    rc = mpi.all_gather(h.data(), (int)n, mpi.mpi_float16_, hall.data(), (int)n, mpi.mpi_float16_, mpi.comm_world_);
    CHECK(rc == MPI_SUCCESS && hall[(size - 1) * n + n - 1] == float16_t((float)value(size - 1, n - 1)).bits,
          "all_gather float16 n=%zu", n);
  }
}

bool neighbours_only = false;

bool neighbours(int a, int b, int size) {
  return (a + 1) % size == b || (b + 1) % size == a;
}

void check_send_recv(int size) {
  const size_t n = 1000;
  for (int a = 0; a < size; a++)
    for (int b = 0; b < size; b++) {
      if (a == b || (neighbours_only && !neighbours(a, b, size)))
        continue;
      std::vector<int32_t> buf(n);
      if (rank_ == a) {
        for (size_t i = 0; i < n; i++)
          buf[i] = (int32_t)(a * 100000 + b * 1000 + (int)i);
        int rc = mpi.send(buf.data(), (int)n, mpi.mpi_int32_, b, 0, mpi.comm_world_);
        CHECK(rc == MPI_SUCCESS, "send %d -> %d returned %d", a, b, rc);
      } else if (rank_ == b) {
        MPI_Status st;
        int rc = mpi.recv(buf.data(), (int)n, mpi.mpi_int32_, a, MPI_ANY_TAG, mpi.comm_world_, &st);
        CHECK(rc == MPI_SUCCESS, "recv %d -> %d returned %d", a, b, rc);
        for (size_t i = 0; i < n; i++)
          if (buf[i] != (int32_t)(a * 100000 + b * 1000 + (int)i)) {
            CHECK(false, "recv %d -> %d: element %zu differs", a, b, i);
            break;
          }
      }
    }
}

size_t split_n = 70000;

void check_split(int size) {
  // MLX's split(color, key): key = rank when not given; here reversed order
  // (--neighbours-only: pairs of ring neighbours, (0,1), (2,3), ..., the last
  // rank of an odd size alone)
  for (int kind = 0; kind < 2; kind++) {
    int color = kind == 1 ? 0 : neighbours_only ? rank_ / 2 : rank_ % 2;
    int key = kind == 0 ? size - rank_ : rank_;
    MPI_Comm sub;
    int rc = mpi.comm_split(mpi.comm_world_, color, key, &sub);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_split(%d, %d) returned %d", color, key, rc);
    if (rc != MPI_SUCCESS)
      continue;
    int srank = -1, ssize = -1;
    mpi.rank(sub, &srank);
    mpi.size(sub, &ssize);
    std::vector<int> members; // world ranks in sub order
    for (int r = 0; r < size; r++)
      if (kind == 1 || (neighbours_only ? r / 2 : r % 2) == color)
        members.push_back(r);
    if (kind == 0)
      std::reverse(members.begin(), members.end());
    CHECK(ssize == (int)members.size() && members[srank] == rank_,
          "split %d: rank %d of %d, want %zu members with us at our place", kind, srank, ssize,
          members.size());
    const size_t n = split_n;
    std::vector<float> x(n);
    std::vector<uint16_t> hx(n);
    for (size_t i = 0; i < n; i++) {
      x[i] = (float)value(rank_, i);
      hx[i] = float16_t((float)value(rank_, i)).bits;
    }
    rc = mpi.all_reduce(MPI_IN_PLACE, x.data(), (int)n, mpi.mpi_float_, mpi.op_sum_, sub);
    CHECK(rc == MPI_SUCCESS, "split %d: all_sum returned %d", kind, rc);
    rc = mpi.all_reduce(MPI_IN_PLACE, hx.data(), (int)n, mpi.mpi_float16_, mpi.op_sum_f16_, sub);
    CHECK(rc == MPI_SUCCESS, "split %d: float16 all_sum returned %d", kind, rc);
    for (size_t i = 0; i < n; i++) {
      float want = 0;
      for (int r : members)
        want += (float)value(r, i);
      if (x[i] != want || f16_to_f32(hx[i]) != want) {
        CHECK(false, "split %d: element %zu is %g / %g, want %g", kind, i, x[i], f16_to_f32(hx[i]), want);
        break;
      }
    }
    std::vector<int32_t> mine(3, rank_), gathered(3 * ssize);
    rc = mpi.all_gather(mine.data(), 3, mpi.mpi_int32_, gathered.data(), 3, mpi.mpi_int32_, sub);
    CHECK(rc == MPI_SUCCESS, "split %d: all_gather returned %d", kind, rc);
    for (int r = 0; r < ssize; r++)
      CHECK(gathered[3 * r] == members[r], "split %d: all_gather block %d is rank %d, want %d", kind, r, gathered[3 * r], members[r]);
    if (ssize > 1) { // a ring of sends inside the split
      int to = (srank + 1) % ssize, from = (srank + ssize - 1) % ssize;
      int32_t out = rank_ * 10, got = -1;
      MPI_Status st;
      rc = mpi.send(&out, 1, mpi.mpi_int32_, to, 0, sub);
      CHECK(rc == MPI_SUCCESS, "split %d: send returned %d", kind, rc);
      rc = mpi.recv(&got, 1, mpi.mpi_int32_, from, MPI_ANY_TAG, sub, &st);
      CHECK(rc == MPI_SUCCESS && got == members[from] * 10, "split %d: recv got %d, want %d", kind, got, members[from] * 10);
    }
    rc = mpi.comm_free(&sub);
    CHECK(rc == MPI_SUCCESS, "split %d: MPI_Comm_free returned %d", kind, rc);
  }
}

int fault_loop(int size, size_t bytes) {
  std::vector<float> x(std::max<size_t>(bytes / 4, 1), 1.0f);
  auto t0 = std::chrono::steady_clock::now();
  for (int it = 0;; it++) {
    auto t = std::chrono::steady_clock::now();
    int rc = mpi.all_reduce(MPI_IN_PLACE, x.data(), (int)x.size(), mpi.mpi_float_, mpi.op_sum_, mpi.comm_world_);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (rc != MPI_SUCCESS) {
      std::printf("mlx-mpi-test: rank %d of %d: MPI_Allreduce returned %d after %.2f s\n", rank_, size, rc, s);
      std::fflush(stdout);
      return 3;
    }
    std::fill(x.begin(), x.end(), 1.0f);
    std::printf("iteration %d done\n", it);
    std::fflush(stdout);
    (void)t0;
  }
}

int bench(int size, size_t bytes, int iters) {
  std::vector<float> x(bytes / 4, 1.0f);
  for (int w = 0; w < 2; w++)
    mpi.all_reduce(MPI_IN_PLACE, x.data(), (int)x.size(), mpi.mpi_float_, mpi.op_sum_, mpi.comm_world_);
  double best = 1e30, total = 0;
  for (int it = 0; it < iters; it++) {
    auto t = std::chrono::steady_clock::now();
    int rc = mpi.all_reduce(MPI_IN_PLACE, x.data(), (int)x.size(), mpi.mpi_float_, mpi.op_sum_, mpi.comm_world_);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (rc != MPI_SUCCESS)
      return 3;
    best = std::min(best, s);
    total += s;
  }
  double mean = total / iters;
  double busbw = 2.0 * (size - 1) / size * (double)bytes / mean / 1e9;
  if (rank_ == 0)
    std::printf("mlx-mpi-bench: %d ranks %zu bytes: mean %.3f ms best %.3f ms busbw %.3f GB/s (%s)\n",
                size, bytes, mean * 1e3, best * 1e3, busbw, mpi.version.c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {1, 7, 1000, 70000};
  bool fault = false;
  size_t fault_bytes = 16u << 20;
  size_t bench_bytes = 0;
  int bench_iters = 0;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--fault-loop")
      fault = true;
    else if (a == "--fault-size" && i + 1 < argc)
      fault_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--ignore-sigterm")
      signal(SIGTERM, SIG_IGN);
    else if (a == "--split-size" && i + 1 < argc)
      split_n = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--neighbours-only")
      neighbours_only = true;
    else if (a == "--bench" && i + 2 < argc) {
      bench_bytes = std::strtoull(argv[++i], nullptr, 10);
      bench_iters = std::atoi(argv[++i]);
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (char* p = argv[++i]; *p;) {
        sizes.push_back(std::strtoull(p, &p, 10));
        if (*p == ',')
          p++;
      }
    } else {
      std::fprintf(stderr, "usage: mpishim-mlx-test [--sizes N,...|--fault-loop [--fault-size BYTES]|--bench BYTES ITERS]\n"
                   "       [--split-size N] [--ignore-sigterm] [--neighbours-only]\n");
      return 2;
    }
  }
  if (!mpi.load()) {
    std::fprintf(stderr, "mlx-mpi-test: cannot use the library: %s\n", mpi.missing.c_str());
    return 1;
  }
  if (!mpi.init_safe()) {
    std::fprintf(stderr, "mlx-mpi-test: MPI_Init failed\n");
    return 1;
  }
  int size = 1;
  mpi.reread_version();
  mpi.rank(mpi.comm_world_, &rank_);
  mpi.size(mpi.comm_world_, &size);
  if (size <= 1) {
    std::fprintf(stderr, "mlx-mpi-test: a world of one process (MLX would use no group)\n");
    return 1;
  }
  if (fault)
    return fault_loop(size, fault_bytes);
  if (bench_bytes) {
    int rc = bench(size, bench_bytes, bench_iters);
    mpi.finalize();
    return rc;
  }
  check_all(size, sizes);
  check_send_recv(size);
  check_split(size);
  int rc = mpi.finalize();
  CHECK(rc == MPI_SUCCESS, "MPI_Finalize returned %d", rc);
  if (fails)
    return 1;
  std::printf("mlx-mpi-test: rank %d of %d: ok (%s)\n", rank_, size, mpi.version.c_str());
  return 0;
}
