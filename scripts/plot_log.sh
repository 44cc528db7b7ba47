#!/usr/bin/env bash
# scripts/plot_log.sh — turns the CSV log of a training example (--log) into a PNG: losses on
# the left axis, test accuracy on the right (for train_charlm: bits per character over time).
# Installs gnuplot from Debian when missing.
#   bash scripts/plot_log.sh mlp.csv            # writes mlp.png
#   bash scripts/plot_log.sh mlp.csv curve.png
set -euo pipefail
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 LOG.csv [OUT.png]" >&2
  exit 2
fi
log="$1"
out="${2:-${log%.csv}.png}"
if [[ ! -s "$log" ]]; then
  echo "$0: no log at '$log' (run an example with --log $log first)" >&2
  exit 1
fi
if ! command -v gnuplot >/dev/null; then
  bash "$(dirname "$0")/setup.sh" gnuplot-nox
fi
# train_charlm's log (step,seconds,train_bpc,val_bpc): bits per character against minutes.
if [[ "$(head -n 1 "$log")" == step,seconds,train_bpc,val_bpc* ]]; then
  gnuplot <<GNUPLOT
set terminal pngcairo size 900,540 noenhanced font ",11"
set output "$out"
set datafile separator ","
set title "$(basename "$log")"
set xlabel "minutes"
set ylabel "bits per character"
set grid
plot "$log" using (\$2/60):3 with linespoints lw 2 title "train", \
     "$log" using (\$2/60):4 with linespoints lw 2 title "validation"
GNUPLOT
  echo "wrote $out"
  exit 0
fi
gnuplot <<GNUPLOT
set terminal pngcairo size 900,540 noenhanced font ",11"
set output "$out"
set datafile separator ","
set key autotitle columnhead top center horizontal
set title "$(basename "$log")"
set xlabel "epoch"
set ylabel "loss"
set y2label "test accuracy (%)"
set ytics nomirror
set y2tics
set grid
plot "$log" using 1:2 with linespoints lw 2 title "train loss", \
     "$log" using 1:3 with linespoints lw 2 title "test loss", \
     "$log" using 1:(100*\$4) axes x1y2 with linespoints lw 2 title "test accuracy"
GNUPLOT
echo "wrote $out"
