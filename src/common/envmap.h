/*
 * envmap.h - the environment contract between meshrun (the writer, launch/env.c,
 * launch/extern.c) and libmeshrun (the readers, coll/env.c, ring/ring.c,
 * tcp/ctl.c, jaccl_cfg.c, nccl_boot.c, mpi.c): one table of every variable, byte
 * for byte MLX's names.
 *
 *   X(NAME, SET_BY, READ_BY, VALUE, MEANING)
 *
 *   NAME     the variable, as an identifier (MR_ENV(NAME) is its name as a string)
 *   SET_BY   backends for which meshrun sets it on the ranks ("" when it does not)
 *   READ_BY  backends whose libmeshrun side reads it ("" when none does: it is for
 *            MLX's own code or a library under it)
 *   VALUE    what meshrun sets (docs/contracts.md, "Set by meshrun on every rank")
 *   MEANING  what the reader does with it ("Read by the ranks (libmeshrun)")
 *
 * A row with SET_BY and READ_BY both "" is read by the tools themselves (meshrun,
 * meshconfig): it is in no generated table; docs/contracts.md's hand-written
 * "Read by the tools" table has it.
 *
 * Code names a variable only through MR_ENV(NAME), which fails to compile for a
 * name not in the table; error messages keep the names as prose (greppable).
 * docs/contracts.md's two tables are generated from this one (`meshrun --help-env`,
 * checked by the test integration/docs_contracts). Text cells must not hold '|'.
 */
#ifndef MR_ENVMAP_H
#define MR_ENVMAP_H

#define MESHRUN_ENV_MAP(X)                                                                      \
	X(MLX_RANK, "all but mpi (Open MPI)", "all",                                            \
	  "the rank, 0..N-1, in hostfile order",                                                \
	  "this rank; else `OMPI_COMM_WORLD_RANK` (mpirun; it wins over SLURM_PROCID, which "   \
	  "mpirun inside an allocation passes on from its node daemon), else `SLURM_PROCID` "   \
	  "(srun); `OMPI_COMM_WORLD_SIZE` / `SLURM_NTASKS` give the size")                      \
	X(MESHRUN_JOB_TOKEN, "all but mpi (Open MPI)", "ring, mesh, jaccl, nccl",               \
	  "32 hex digits, random per job; libmeshrun's hello carries it so a stray or foreign " \
	  "connection is refused",                                                              \
	  "the job token above; absent: no check")                                              \
	X(MLX_HOSTFILE, "ring", "ring",                                                         \
	  "path of a file on each host: JSON, one list of `\"ip:port\"` per rank; ports start " \
	  "at `--starting-port`, +1 per IP and per connection (`--connections-per-ip`)",        \
	  "the per-rank address lists above (the flat list form other tools write is accepted " \
	  "too)")                                                                               \
	X(MESHRUN_HOSTFILE, "mpi (`--mpi-impl meshrun`)", "ring",                                \
	  "as `MLX_HOSTFILE`, which stays unset so that MLX's `init()` with \"any\" skips its " \
	  "own ring and reaches its mpi backend (libmeshrun-mpi)",                              \
	  "the ring's hostfile when `MLX_HOSTFILE` is unset")                                   \
	X(MESHRUN_MESH_HOSTFILE, "mesh; mpi (`--mpi-impl meshrun`) on a full mesh", "mesh",                                                 \
	  "path of a file on each host: JSON, one row per rank, cell [i][j] null on the "       \
	  "diagonal, else the `\"ip:port\"` list of rank i on its cables to rank j (from the "  \
	  "hostfile's `mesh_ips`); port `--starting-port` + i",                                 \
	  "the mesh backend's addresses: rank j connects to every address of [i][j] for i < j " \
	  "(one connection per cable, striped); unset: the mesh counts as absent")             \
	X(MLX_RING_VERBOSE, "ring, mesh, mpi (`--mpi-impl meshrun`)", "ring, mesh", "`1` with `--verbose`", \
	  "log connection set-up on stderr")                                                    \
	X(MLX_JACCL_COORDINATOR, "jaccl, jaccl-ring", "jaccl",                                  \
	  "`<rank 0's first ip>:<--starting-port>`",                                            \
	  "rank 0's side channel `ip:port` (`JACCL_COORDINATOR` wins, as in MLX)")              \
	X(MLX_IBV_DEVICES, "jaccl, jaccl-ring", "jaccl",                                        \
	  "path of a file holding the hostfile's `rdma` matrix as JSON (checked first: size, "  \
	  "null diagonal, no missing peer)",                                                    \
	  "path of the device matrix: row = rank, cell = null, a device name, or a list of "    \
	  "names (`JACCL_IBV_DEVICES` wins)")                                                   \
	X(MLX_JACCL_RING, "jaccl-ring", "jaccl", "`1`",                                         \
	  "present: prefer the ring algorithm (so does `JACCL_RING`)")                          \
	X(NCCL_HOST_IP, "nccl", "nccl", "rank 0's first ip", "rank 0's id server: its address") \
	X(NCCL_PORT, "nccl", "nccl", "`--nccl-port` (12345)", "rank 0's id server: its port")   \
	X(MLX_WORLD_SIZE, "nccl", "nccl", "number of ranks", "the world size")                  \
	X(CUDA_VISIBLE_DEVICES, "nccl", "", "rank modulo `-n`", "")                             \
	X(NCCL_DEBUG, "nccl", "", "`INFO` with `--verbose`", "")                                \
	X(COLUMNS, "all", "", "the terminal's width (`$COLUMNS`, else meshrun's stdout when it " \
	  "is a terminal), unless the hostfile's envs or `--env` set `COLUMNS`; as mlx.launch", "") \
	X(LINES, "all", "", "the terminal's height, set together with `COLUMNS`", "")          \
	X(OMPI_COMM_WORLD_RANK, "", "all", "",                                                  \
	  "this rank under mpirun, when `MLX_RANK` is not set")                                 \
	X(OMPI_COMM_WORLD_SIZE, "", "all, mpi", "",                                             \
	  "the size that goes with `OMPI_COMM_WORLD_RANK`; mpi: whether the process runs under " \
	  "an MPI launcher")                                                                    \
	X(SLURM_PROCID, "", "all", "",                                                          \
	  "this rank under srun, when neither `MLX_RANK` nor `OMPI_COMM_WORLD_RANK` is set")    \
	X(SLURM_NTASKS, "", "all", "", "the size that goes with `SLURM_PROCID`")                \
	X(JACCL_COORDINATOR, "mpi (`--mpi-impl meshrun`) with a complete rdma matrix", "jaccl",      \
	  "as `MLX_JACCL_COORDINATOR` (MLX's own names stay unset)",                           \
	  "as `MLX_JACCL_COORDINATOR`, and wins over it")   \
	X(JACCL_IBV_DEVICES, "mpi (`--mpi-impl meshrun`) with a complete rdma matrix", "jaccl",      \
	  "as `MLX_IBV_DEVICES`, no ring hostfile then (libmeshrun would take the ring first)",  \
	  "as `MLX_IBV_DEVICES`, and wins over it")         \
	X(JACCL_RING, "mpi (`--mpi-impl meshrun`) with an rdma ring only", "jaccl", "`1`",      \
	  "as `MLX_JACCL_RING`")                                   \
	X(JACCL_RANK, "", "jaccl", "", "rank (before `MLX_RANK`)")                              \
	X(MESHRUN_IB_GID_INDEX, "", "jaccl", "",                                                \
	  "GID index to use instead of the IPv4-mapped GID (which jaccl looks for otherwise, "  \
	  "and without which it fails naming the interface to give an IPv4 address); an "       \
	  "escape hatch, e.g. `0` for soft-RoCE devices in one network namespace (on a Mac "    \
	  "index 0 is link-local and fails)")                                                   \
	X(MESHRUN_JACCL_QP, "", "jaccl", "",                                                    \
	  "queue-pair type: `auto` (default: UC, all Apple's Thunderbolt driver has), `uc` or " \
	  "`rc` (where a device has reliable connections); the same on every rank")             \
	X(MESHRUN_JACCL_FRAME, "", "jaccl", "",                                                 \
	  "bytes per RDMA SEND and RECV: a power of two from `4K` (default) to `512K`; frames " \
	  "above 4K need macOS 26.3 or later on Macs; the same on every rank")                  \
	X(MESHSIM_PRETEND_RDMA, "", "jaccl", "",                                                \
	  "set by `meshsim up --pretend-rdma` on simulated hosts: the error for a missing RDMA " \
	  "device names that flag")                                                             \
	X(MLX_NCCL_TIMEOUT, "", "nccl", "", "how long to wait for rank 0's id")                 \
	X(MLX_MPI_LIBNAME, "mpi (`--mpi-impl meshrun`)", "mpi",                                 \
	  "libmeshrun-mpi's path: `<meshrun's prefix>/lib/libmeshrun-mpi.so` (`.dylib` on "     \
	  "macOS; the build tree's lib/ for a meshrun run from it), unless the hostfile's envs " \
	  "or `--env` set it",                                                                  \
	  "the libmpi to dlopen (default `libmpi.so`, then `libmpi.so.40`); MLX's mpi backend " \
	  "opens it too")                                                                       \
	X(PMI_RANK, "", "mpi", "", "whether the process runs under an MPI launcher")            \
	X(PMI_SIZE, "", "mpi", "", "whether the process runs under an MPI launcher")            \
	X(PMIX_RANK, "", "mpi", "", "whether the process runs under an MPI launcher")           \
	X(MESHRUN_MPI_ERRORS, "", "libmeshrun-mpi", "",                                         \
	  "what a failing MPI call does in libmeshrun-mpi: `fatal` (default, as Open MPI's "    \
	  "MPI_ERRORS_ARE_FATAL: the message, then exit with the MPI error class as status, "   \
	  "since MLX does not check the codes) or `return` (MPI_ERRORS_RETURN)")               \
	X(MESHRUN_TIMEOUT, "", "all", "",                                                       \
	  "bound on any wait for a peer (seconds, `1.5`, `500ms`; default 30); ring and mesh: " \
	  "also on a packet once its first byte came (a link that trickles under packet loss " \
	  "fails naming it; one warning line on stderr per link once a packet takes a quarter " \
	  "of it, at most 2 s)")                                                                \
	X(MESHRUN_RING_TCP_CC, "", "ring, mesh", "",                                                  \
	  "TCP congestion control of the ring's data connections (default `reno`, which costs " \
	  "a quarter less CPU than timer-paced BBR on veth and Thunderbolt links; `system` "    \
	  "keeps the system's choice; a name the kernel refuses falls back to the system's "    \
	  "choice)")                                                                            \
	X(MESHRUN_RING_SNDBUF, "", "ring, mesh", "",                                                  \
	  "send buffer (`SO_SNDBUF`) of the ring's data connections: a size from 4K to 256M, "  \
	  "default `512K` (the kernel doubles it and caps it at `net.core.wmem_max`); "         \
	  "`system` leaves the kernel's autotuning, which lets megabytes queue per connection " \
	  "and made 16 MiB all-reduces a third to a half slower on the bench machine; a "       \
	  "malformed value fails init naming the variable")                                   \
	X(MESHRUN_MESH_SCHEDULE, "", "mesh", "",                                                \
	  "the mesh backend's all-reduce schedule: `auto` (default) times the mesh schedule "   \
	  "and the ring schedule (over the mesh's connections to the two ring neighbours) on "  \
	  "the first six all-reduces of each size class (a power of two, from 32K, 3 ranks "    \
	  "and more: mesh, ring, mesh, ring, mesh, ring; the first of each warms it up, the "  \
	  "faster of the other two counts), agrees on the slowest rank's times and keeps the " \
	  "mesh where it is at least 5% faster, else the ring (logged with "                  \
	  "`MLX_RING_VERBOSE`); `mesh` or `ring` forces one; anything else fails init naming "  \
	  "the variable")                                                                       \
	X(MESHRUN_SSH_PERSIST, "", "", "",                                                      \
	  "meshrun and meshconfig: --persist's default (a duration such as `10m`; `0` or "     \
	  "`off`: none)")

#define MR_ENV_ENUM_(name, set_by, read_by, value, meaning) MR_ENV_ID_##name,
enum mr_env_id { MESHRUN_ENV_MAP(MR_ENV_ENUM_) MR_ENV_COUNT };

/*
 * "NAME" for a variable of the table (a compile error for any other): an address
 * constant, so it works in static initialisers ({ MR_ENV(MLX_RANK), NULL }).
 */
#define MR_ENV(name) (&(#name)[0 * MR_ENV_ID_##name])

#endif
