#!/bin/bash
# report.sh OUTDIR: from OUTDIR/raw.csv (impl,ranks,bytes,round,seconds) write
# summary.csv (medians per impl, ranks, size), compare.csv (ours vs the best of
# Open MPI and Gloo, vs the raw TCP bound, latency vs Open MPI; libmeshrun's
# mpi backend vs Open MPI, the same engine, when it ran), print the
# comparison table, and plot busbw vs size to busbw.png when gnuplot exists.
# busbw = bytes / t * 2(n-1)/n (GB/s = 1e9 bytes/s).
set -euo pipefail
out=${1:?usage: report.sh OUTDIR}
[ -s "$out/raw.csv" ] || { echo "[ERROR] $out/raw.csv is empty: nothing to report" >&2; exit 1; }

awk -F, -v out="$out" '
function median(key,   n, i, j, v, a) {
	n = cnt[key]
	for (i = 1; i <= n; i++) a[i] = val[key, i]
	for (i = 2; i <= n; i++) {            # insertion sort (mawk has no asort)
		v = a[i]
		for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]
		a[j + 1] = v
	}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function human(b) {
	if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) "M"
	if (b >= 1024 && b % 1024 == 0) return (b / 1024) "K"
	return b
}
function fmt_ratio(a, b) { return ((a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-") }
function fmt_bw(x) { return ((x > 0) ? sprintf("%.3f", x) : "-") }
{
	key = $1 SUBSEP $2 SUBSEP $3
	if (!(key in cnt)) { cnt[key] = 0; order[++nkeys] = key }
	cnt[key]++
	val[key, cnt[key]] = $5
	impls[$1] = 1; ranks[$2] = 1; sizes[$3] = 1
}
END {
	sfile = out "/summary.csv"
	print "impl,ranks,bytes,rounds,median_us,algbw_GBps,busbw_GBps" > sfile
	for (k = 1; k <= nkeys; k++) {
		split(order[k], f, SUBSEP)
		t = median(order[k]); n = f[2]; b = f[3]
		alg = b / t / 1e9; bus = alg * 2 * (n - 1) / n
		med[order[k]] = t; busbw[order[k]] = bus
		printf "%s,%d,%d,%d,%.3f,%.4f,%.4f\n", f[1], n, b, cnt[order[k]], t * 1e6, alg, bus > sfile
		# plot data, one file per impl and rank count
		printf "%d %.6f\n", b, bus > (out "/plot/" f[1] "_n" n ".dat")
	}
	cfile = out "/compare.csv"
	print "ranks,bytes,ours_busbw,openmpi_busbw,gloo_ring_busbw,gloo_chunked_busbw,best_other,ours_over_best,tcpraw_busbw,ours_over_raw,ours_us,openmpi_us,ours_us_over_openmpi,meshrun_mpi_busbw,meshrun_mpi_over_openmpi,mlx_shim_busbw,mlx_openmpi_busbw,mlx_shim_over_ours,mlx_shim_over_mlx_openmpi" > cfile
	printf "\n%-5s %-6s %9s %9s %9s %9s %9s %7s %9s %7s %11s %11s %7s %9s %7s\n", "ranks", "size",
	       "ours", "openmpi", "gloo-ring", "gloo-chk", "tcp-raw", "x best", "", "%raw",
	       "ours us", "ompi us", "lat x", "mr-mpi", "x ompi"
	printf "%-5s %-6s %9s %9s %9s %9s %9s %7s %9s %7s %11s %11s %7s %9s %7s\n", "", "",
	       "GB/s", "GB/s", "GB/s", "GB/s", "GB/s", "", "", "", "", "", "", "GB/s", ""
	# ranks and sizes in numeric order
	nr = 0; for (r in ranks) rl[++nr] = r + 0
	for (i = 2; i <= nr; i++) { v = rl[i]; for (j = i - 1; j >= 1 && rl[j] > v; j--) rl[j + 1] = rl[j]; rl[j + 1] = v }
	ns = 0; for (s in sizes) sl[++ns] = s + 0
	for (i = 2; i <= ns; i++) { v = sl[i]; for (j = i - 1; j >= 1 && sl[j] > v; j--) sl[j + 1] = sl[j]; sl[j + 1] = v }
	for (i = 1; i <= nr; i++) for (j = 1; j <= ns; j++) {
		n = rl[i]; b = sl[j]
		o = busbw["ours" SUBSEP n SUBSEP b] + 0
		m = busbw["openmpi" SUBSEP n SUBSEP b] + 0
		g1 = busbw["gloo-ring" SUBSEP n SUBSEP b] + 0
		g2 = busbw["gloo-ring-chunked" SUBSEP n SUBSEP b] + 0
		raw = busbw["tcp-raw" SUBSEP n SUBSEP b] + 0
		mm = busbw["meshrun-mpi" SUBSEP n SUBSEP b] + 0
		xs = busbw["mlx-shim" SUBSEP n SUBSEP b] + 0
		xo = busbw["mlx-openmpi" SUBSEP n SUBSEP b] + 0
		best = m; if (g1 > best) best = g1; if (g2 > best) best = g2
		ot = med["ours" SUBSEP n SUBSEP b] * 1e6; mt = med["openmpi" SUBSEP n SUBSEP b] * 1e6
		printf "%d,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", n, b, fmt_bw(o), fmt_bw(m), fmt_bw(g1),
		       fmt_bw(g2), fmt_bw(best), fmt_ratio(o, best), fmt_bw(raw),
		       ((o > 0 && raw > 0) ? sprintf("%.1f", 100 * o / raw) : "-"),
		       (ot > 0 ? sprintf("%.1f", ot) : "-"), (mt > 0 ? sprintf("%.1f", mt) : "-"),
		       fmt_ratio(ot, mt), fmt_bw(mm), fmt_ratio(mm, m), fmt_bw(xs), fmt_bw(xo),
		       fmt_ratio(xs, o), fmt_ratio(xs, xo) > cfile
		mlxrow[n, b] = sprintf("%-5d %-6s %9s %9s %9s %9s %9s", n, human(b), fmt_bw(xs), fmt_bw(xo),
		       fmt_bw(o), fmt_ratio(xs, o), fmt_ratio(xs, xo))
		if (xs > 0 || xo > 0) have_mlx = 1
		printf "%-5d %-6s %9s %9s %9s %9s %9s %7s %9s %7s %11s %11s %7s %9s %7s\n", n, human(b), fmt_bw(o),
		       fmt_bw(m), fmt_bw(g1), fmt_bw(g2), fmt_bw(raw), fmt_ratio(o, best), "",
		       ((o > 0 && raw > 0) ? sprintf("%.0f%%", 100 * o / raw) : "-"),
		       (ot > 0 ? sprintf("%.1f", ot) : "-"), (mt > 0 ? sprintf("%.1f", mt) : "-"),
		       fmt_ratio(ot, mt), fmt_bw(mm), fmt_ratio(mm, m)
	}
	print "\nx best: ours / best of openmpi, gloo-ring, gloo-ring-chunked (busbw); %raw: ours / tcp-raw;"
	print "lat x: ours / openmpi median time per operation (lower is better);"
	print "mr-mpi: the mpi backend of libmeshrun (Open MPI underneath); x ompi: its busbw / the openmpi busbw (about 1)."
	if (have_mlx) {
		printf "\nMLX mpi backend pattern (bench-ar-mlxmpi), busbw GB/s:\n%-5s %-6s %9s %9s %9s %9s %9s\n", "ranks", "size", "mlx-shim", "mlx-ompi", "ours", "x ours", "x ompi"
		for (i = 1; i <= nr; i++) for (j = 1; j <= ns; j++) print mlxrow[rl[i], sl[j]]
		print "mlx-shim: through libmeshrun-mpi (libmeshrun ring); mlx-ompi: through the libmpi of Open MPI; x ours: mlx-shim / ours; x ompi: mlx-shim / mlx-ompi."
	}
}' <(mkdir -p "$out/plot" && rm -f "$out"/plot/*.dat && cat "$out/raw.csv")

if command -v gnuplot >/dev/null; then
	nlist=$(ls "$out"/plot/*.dat | sed 's/.*_n\([0-9]*\)\.dat/\1/' | sort -n | uniq)
	count=$(wc -w <<<"$nlist")
	{
		echo "set terminal pngcairo size $((640 * count)),480 noenhanced" 2>/dev/null
		echo "set output '$out/busbw.png'"
		echo "set multiplot layout 1,$count"
		echo "set logscale x 2; set grid"
		echo "set xlabel 'buffer size (bytes)'; set ylabel 'bus bandwidth (GB/s)'"
		# one tick per measured size, labelled as given (4K, 1M, ...)
		tics=$(awk -F, '{print $3}' "$out/raw.csv" | sort -n | uniq | awk '
			{ b = $1; l = b
			  if (b % 1048576 == 0) l = (b / 1048576) "M"; else if (b % 1024 == 0) l = (b / 1024) "K"
			  printf "%s\"%s\" %s", (NR > 1 ? ", " : ""), l, b }')
		echo "set xtics ($tics)"
		echo "set key outside bottom center horizontal"
		for n in $nlist; do
			echo "set title '$n ranks: busbw = bytes/t x 2(n-1)/n'"
			plots=()
			for impl in ours openmpi meshrun-mpi gloo-ring gloo-ring-chunked tcp-raw; do
				f=$out/plot/${impl}_n$n.dat
				[ -s "$f" ] || continue
				style="linespoints lw 2"
				[ "$impl" = tcp-raw ] && style="lines dt 2 lw 2"
				plots+=("'$f' using 1:2 with $style title '$impl'")
			done
			(IFS=,; echo "plot ${plots[*]}")
		done
		echo "unset multiplot"
	} >"$out/plot/busbw.gp"
	if gnuplot "$out/plot/busbw.gp" 2>"$out/plot/gnuplot.err"; then
		echo "plot: $out/busbw.png"
	else
		# terminals differ between gnuplot builds: fall back to the plain png one
		sed -i 's/^set terminal pngcairo/set terminal png/' "$out/plot/busbw.gp"
		gnuplot "$out/plot/busbw.gp" 2>"$out/plot/gnuplot.err" && echo "plot: $out/busbw.png" ||
			echo "[WARN] gnuplot failed: $(head -3 "$out/plot/gnuplot.err")" >&2
	fi
else
	echo "[WARN] gnuplot not found: no plot" >&2
fi
# the policy and load the figures were taken under, with them
[ -f "$out/env.txt" ] && grep -E '^(policy|tcp congestion|send buffer|load)' "$out/env.txt"
echo "results: $out (raw.csv summary.csv compare.csv env.txt links.txt)"
