# packaging/homebrew/meshrun.rb - Homebrew formula: meshrun, meshconfig and
# libmeshrun (shared and static, headers, pkg-config file, CMake package, man
# pages, bash and zsh completion). meshsim is not part of it: it needs Linux
# network namespaces.
#
# The project has no public release yet, so the formula builds the head of a git
# repository, by default the checkout named by HOMEBREW_MESHRUN_REPO (brew
# passes HOMEBREW_* variables on to formulae). Homebrew installs formulae from
# taps only, so put this file in a tap of your own (docs/guide-macs.md, step 1):
#
#   brew tap-new --no-git "$USER/meshrun"
#   cp packaging/homebrew/meshrun.rb "$(brew --repository "$USER/meshrun")/Formula/"
#   HOMEBREW_MESHRUN_REPO="file://$PWD" brew install --HEAD "$USER/meshrun/meshrun"
#
# The jaccl backend (RDMA over Thunderbolt) is compiled in when the SDK has
# infiniband/verbs.h and librdma (macOS 26.2 and later); otherwise libmeshrun
# says that jaccl is unavailable and the ring backend works as usual.
class Meshrun < Formula
  desc "Configure Thunderbolt-cabled Macs and launch MLX-style distributed jobs"
  homepage "https://example.invalid/meshrun" # no public home yet
  head ENV.fetch("HOMEBREW_MESHRUN_REPO", "file://#{Dir.home}/meshrun"), using: :git

  depends_on "cmake" => :build
  depends_on "pkgconf" => :build # provides pkg-config
  depends_on "cjson"
  depends_on "libssh2"

  def install
    # the tests need cmocka and Linux network namespaces: the Linux CI runs them
    system "cmake", "-S", ".", "-B", "build", "-DMESHRUN_TESTS=OFF", *std_cmake_args
    system "cmake", "--build", "build"
    system "cmake", "--install", "build"
  end

  test do
    assert_match(/^meshrun \d+\.\d+\.\d+$/, shell_output("#{bin}/meshrun --version"))
    assert_match(/^meshconfig \d+\.\d+\.\d+$/, shell_output("#{bin}/meshconfig --version"))

    # two local ranks, one all-reduce over the ring backend (loopback TCP)
    out = shell_output("#{bin}/meshrun -n 2 -- #{bin}/meshrun-allreduce-demo")
    assert_equal 2, out.scan(/all_sum = 3 \(expected 3\).*: OK$/).size

    # a program of one's own, built against the installed library
    (testpath/"sum.c").write <<~C
      #include <meshrun/meshrun.h>
      #include <stdio.h>
      int main(void)
      {
        struct meshrun_err err = MESHRUN_ERR_INIT;
        struct meshrun_group *g = NULL;
        long long one = 1, sum = 0;
        int size;

        if (meshrun_init(&g, MESHRUN_BACKEND_ANY, 0, &err) < 0 ||
            meshrun_all_sum(g, &one, &sum, 1, MESHRUN_INT64, &err) < 0) {
          fprintf(stderr, "%s\\n", err.msg);
          return 1;
        }
        size = meshrun_size(g);
        meshrun_free(g);
        printf("sum %lld of %d\\n", sum, size);
        return sum == size ? 0 : 1;
      }
    C
    system ENV.cc, "sum.c", "-I#{include}", "-L#{lib}", "-Wl,-rpath,#{lib}", "-lmeshrun", "-o", "sum"
    assert_match "sum 3 of 3", shell_output("#{bin}/meshrun -n 3 -- #{testpath}/sum")
  end
end
