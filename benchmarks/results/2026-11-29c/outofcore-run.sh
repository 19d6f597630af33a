#!/bin/bash
# One out-of-core DiffGen run under /usr/bin/time -v: outofcore-run.sh TREE LABEL, where
# TREE is the dpfast checkout put on PYTHONPATH; writes time-LABEL.txt and prints a line.
tree=$1
label=$2
cd /tmp/dgbench
rm -rf "out-$label" "out-$label".*
PYTHONPATH=$tree /usr/bin/time -v /work/main/.venv/bin/python -m dpfast release diffgen \
  adult340.parquet --schema /work/main/dpfast/datasets/adult_diffgen.schema.json \
  --target income --steps 10 --epsilon 1 --seed 3 --memory-limit 256MiB \
  -o "out-$label.parquet" --quiet 2> "time-$label.txt"
echo "$label rc=$? $(grep -E 'Elapsed|Maximum resident|User time|System time' "time-$label.txt" | awk -F': ' '{printf "%s; ", $2}')"
